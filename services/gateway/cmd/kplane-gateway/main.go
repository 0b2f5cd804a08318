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

// gcPercent is the gateway's GOGC unless the environment sets one: its
// live heap is small and bounded, so collecting at 4x it instead of 2x
// costs a few tens of MiB and saves 5-15% of its CPU per request (issue
// 14; measured with kplane-load, get and cr-create).
const gcPercent = 400

func main() {
	command.DefaultGCPercent(gcPercent)
	if err := command.Run(context.Background(), "kplane-gateway", os.Args[1:], os.Stderr, server.NewOptions(), server.New); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-gateway:", err)
		os.Exit(1)
	}
}
