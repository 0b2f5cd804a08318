package natsrpc

import (
	"errors"
	"flag"
	"fmt"

	"github.com/nats-io/nats.go"
)

// ConnOptions are the flags every service uses to reach NATS.
type ConnOptions struct {
	URL   string
	Token string
	Creds string
}

// AddFlags registers --nats-url, --nats-token and --nats-creds; what says
// what the service uses NATS for, in the URL flag's help.
func (o *ConnOptions) AddFlags(fs *flag.FlagSet, what string) {
	fs.StringVar(&o.URL, "nats-url", o.URL, "NATS URL "+what)
	fs.StringVar(&o.Token, "nats-token", o.Token, "NATS authentication token")
	fs.StringVar(&o.Creds, "nats-creds", o.Creds, "NATS credentials file (JWT and NKey seed)")
}

// Validate checks the flags; required says the service cannot run
// without NATS.
func (o *ConnOptions) Validate(required bool) []error {
	var errs []error
	if required && o.URL == "" {
		errs = append(errs, errors.New("--nats-url is required"))
	}
	if o.Token != "" && o.Creds != "" {
		errs = append(errs, errors.New("--nats-token and --nats-creds are exclusive"))
	}
	if (o.Token != "" || o.Creds != "") && o.URL == "" {
		errs = append(errs, errors.New("--nats-token and --nats-creds need --nats-url"))
	}
	return errs
}

// Connect connects as name. The connection retries in the background
// (NATS may start after the service) and reconnects for ever.
func (o *ConnOptions) Connect(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1)}
	switch {
	case o.Token != "":
		opts = append(opts, nats.Token(o.Token))
	case o.Creds != "":
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", o.URL, err)
	}
	return nc, nil
}
