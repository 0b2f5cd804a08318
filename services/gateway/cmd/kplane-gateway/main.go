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

// gcHeadroom is how much the gateway's heap may grow between collections
// however little of it is live (see command.KeepGCHeadroom): the gateway
// keeps no objects, and its live heap of about 10 MiB at rest was
// collected after every 10 MiB it allocated, which cost 5-16% of its CPU
// per request (issue 14; kplane-load, get, create and cr-create).
const gcHeadroom = 64 << 20

func main() {
	command.KeepGCHeadroom(gcHeadroom)
	if err := command.Run(context.Background(), "kplane-gateway", os.Args[1:], os.Stderr, server.NewOptions(), server.New); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-gateway:", err)
		os.Exit(1)
	}
}
