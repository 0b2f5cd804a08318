package launcher

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsReadyTimeout bounds the wait for NATS to accept connections.
const natsReadyTimeout = 30 * time.Second

// startNATS runs a NATS server with JetStream on 127.0.0.1:port with the
// users and permissions of the configuration file config, keeping its
// streams in dir and its log in logFile.
func startNATS(config, dir, logFile string, port int) (*server.Server, error) {
	o, err := server.ProcessConfigFile(config)
	if err != nil {
		return nil, fmt.Errorf("load NATS configuration: %w", err)
	}
	o.Host, o.Port = "127.0.0.1", port
	o.JetStream, o.StoreDir = true, dir
	if err := privateFile(logFile); err != nil {
		return nil, err
	}
	o.LogFile = logFile
	// The launcher owns signals: it stops NATS after the services.
	o.NoSigs = true
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
