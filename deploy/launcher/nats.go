package launcher

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsReadyTimeout bounds the wait for NATS to accept connections.
const natsReadyTimeout = 30 * time.Second

// startNATS runs a NATS server with JetStream on 127.0.0.1:port that
// accepts only token, keeping its streams in dir and its log in logFile.
func startNATS(dir, logFile string, port int, token string) (*server.Server, error) {
	o := &server.Options{
		Host:          "127.0.0.1",
		Port:          port,
		JetStream:     true,
		StoreDir:      dir,
		Authorization: token,
		LogFile:       logFile,
		// The launcher owns signals: it stops NATS after the services.
		NoSigs: true,
	}
	srv, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("create embedded nats server: %w", err)
	}
	srv.ConfigureLogger()
	srv.Start()
	if !srv.ReadyForConnections(natsReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("embedded nats server not ready after %v (see %s)", natsReadyTimeout, logFile)
	}
	return srv, nil
}

// natsToken returns the token kept in path, making one on first use so
// that services restarted later still connect.
func natsToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read nats token: %w", err)
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("make nats token: %w", err)
	}
	token := hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write nats token: %w", err)
	}
	return token, nil
}
