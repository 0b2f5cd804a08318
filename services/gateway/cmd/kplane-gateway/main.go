// Command kplane-gateway is kplane's aggregator-gateway, the only public
// endpoint: it authenticates every request and routes it by API
// group/version to core or to an aggregated API server.
package main

import (
	"context"
	"fmt"
	"os"

	"kplane.dev/libs/command"
	"kplane.dev/services/gateway/internal/server"
)

func main() {
	if err := command.Run(context.Background(), "kplane-gateway", os.Args[1:], os.Stderr, server.NewOptions(), server.New); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-gateway:", err)
		os.Exit(1)
	}
}
