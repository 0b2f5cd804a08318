package reviews

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/natsrpc"
)

// Requester asks authn or authz a question on a subject and decodes the
// answer into out. Its errors are Kubernetes status errors.
type Requester interface {
	RequestJSON(ctx context.Context, subject string, in, out any) error
}

// NATS is a Requester over a NATS connection; a nil connection (core runs
// without --nats-url) answers every question 503 ServiceUnavailable.
type NATS struct {
	conn    *nats.Conn
	timeout time.Duration
}

var _ Requester = (*NATS)(nil)

// NewNATS returns a Requester over nc that waits up to timeout for an
// answer.
func NewNATS(nc *nats.Conn, timeout time.Duration) *NATS {
	return &NATS{conn: nc, timeout: timeout}
}

// RequestJSON sends in on subject and decodes the reply into out. Every
// question core asks (token and access reviews, rules, token signing) is
// harmless to ask twice, so one whose replica died is asked again.
func (n *NATS) RequestJSON(ctx context.Context, subject string, in, out any) error {
	if n.conn == nil {
		return apierrors.NewServiceUnavailable("authentication and authorization reviews need NATS, and core runs without --nats-url")
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	return natsrpc.RequestJSON(ctx, n.conn, subject, in, out, natsrpc.Idempotent())
}
