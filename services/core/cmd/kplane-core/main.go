// Command kplane-core is the core-resource service: it serves kplane's
// built-in API groups from etcd to the gateway.
package main

import (
	"context"
	"fmt"
	"os"

	"kplane.dev/libs/command"
	"kplane.dev/services/core/internal/server"
)

func main() {
	if err := command.Run(context.Background(), "kplane-core", os.Args[1:], os.Stderr, server.NewOptions(), server.New); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-core:", err)
		os.Exit(1)
	}
}
