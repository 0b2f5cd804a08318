package launcher

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
)

// etcdStreamWorkers is how many goroutines of the embedded etcd's gRPC
// server take requests in turn. By default each request gets a new
// goroutine, whose stack then grows: copying stacks was 11% of the
// etcd's CPU under a load of gets. A request finding every worker busy
// (each watch stream holds one) still gets a goroutine of its own.
const etcdStreamWorkers = 64

// startEtcd runs a single-member etcd keeping its data in dir and its log
// in logFile, serving clients on 127.0.0.1:port.
func startEtcd(ctx context.Context, dir, logFile string, port int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "kplane"
	cfg.Dir = dir
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	// A single member has no peers; its peer URL only has to be the same
	// on every start, as the data directory records it.
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogLevel = "warn"
	if err := privateFile(logFile); err != nil {
		return nil, err
	}
	cfg.LogOutputs = []string{logFile}
	cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{grpc.NumStreamWorkers(etcdStreamWorkers)}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd: %w", ctx.Err())
	}
}
