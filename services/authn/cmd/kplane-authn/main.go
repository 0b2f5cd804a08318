// Command kplane-authn is the authentication service: it answers
// TokenReviews and signs service account tokens over NATS, and serves the
// TokenReview webhook over HTTPS.
package main

import (
	"context"
	"fmt"
	"os"

	"kplane.dev/libs/command"
	"kplane.dev/services/authn/internal/server"
)

func main() {
	if err := command.Run(context.Background(), "kplane-authn", os.Args[1:], os.Stderr, server.NewOptions(), server.New); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-authn:", err)
		os.Exit(1)
	}
}
