// Command kplane-admission is the admission service: it answers the
// admission reviews core and crd send over NATS for every write.
package main

import (
	"context"
	"fmt"
	"os"

	"kplane.dev/libs/command"
	"kplane.dev/services/admission/internal/server"
)

func main() {
	if err := command.Run(context.Background(), "kplane-admission", os.Args[1:], os.Stderr, server.NewOptions(), server.New); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-admission:", err)
		os.Exit(1)
	}
}
