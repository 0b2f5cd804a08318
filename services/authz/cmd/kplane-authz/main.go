// Command kplane-authz is the authorization service: it answers
// SubjectAccessReviews over NATS and as kube's authorization webhook.
package main

import (
	"context"
	"fmt"
	"os"

	"kplane.dev/libs/command"
	"kplane.dev/services/authz/internal/server"
)

func main() {
	if err := command.Run(context.Background(), "kplane-authz", os.Args[1:], os.Stderr, server.NewOptions(), server.New); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-authz:", err)
		os.Exit(1)
	}
}
