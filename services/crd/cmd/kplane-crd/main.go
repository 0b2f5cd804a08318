// Command kplane-crd is the crd service: it serves
// apiextensions.k8s.io/v1 CustomResourceDefinitions and the custom
// resources they define from etcd to the gateway.
package main

import (
	"context"
	"fmt"
	"os"

	"kplane.dev/libs/command"
	"kplane.dev/services/crd/internal/server"
)

func main() {
	if err := command.Run(context.Background(), "kplane-crd", os.Args[1:], os.Stderr, server.NewOptions(), server.New); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-crd:", err)
		os.Exit(1)
	}
}
