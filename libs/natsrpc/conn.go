package natsrpc

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"kplane.dev/proto/access"
)

// EnvToken is the environment variable holding a NATS token, for an
// installation whose NATS admits services by a shared token. A token is
// never a flag: command lines are visible to every local user.
const EnvToken = "KPLANE_NATS_TOKEN"

// ConnOptions are the flags every service uses to reach NATS. Credentials
// come from files (or, for a token, the environment), never from the
// command line.
type ConnOptions struct {
	URL string
	// NKeyFile holds the service's NKey user seed (kplane.dev/libs/natsauth
	// makes them).
	NKeyFile string
	// Creds is a JWT user credentials file (JWT and NKey seed).
	Creds string
	// TokenFile holds a token; without any credential flag the token in
	// EnvToken, if set, is used.
	TokenFile string
	// CAFile holds the CAs that sign the NATS server's certificate: with
	// it, the connection is TLS and the server must prove who it is.
	CAFile string
	// CertFile and KeyFile are a client certificate for a NATS server
	// that verifies its clients.
	CertFile, KeyFile string
}

// AddFlags registers --nats-url, --nats-nkey-file, --nats-creds,
// --nats-token-file and the TLS flags --nats-ca-file,
// --nats-client-cert-file and --nats-client-key-file; what says what the
// service uses NATS for, in the URL flag's help.
func (o *ConnOptions) AddFlags(fs *flag.FlagSet, what string) {
	fs.StringVar(&o.URL, "nats-url", o.URL, "NATS URL "+what)
	fs.StringVar(&o.NKeyFile, "nats-nkey-file", o.NKeyFile, "file holding this service's NATS NKey seed (mode 0600)")
	fs.StringVar(&o.Creds, "nats-creds", o.Creds, "NATS user credentials file (JWT and NKey seed)")
	fs.StringVar(&o.TokenFile, "nats-token-file", o.TokenFile, "file holding a NATS authentication token (else the environment variable "+EnvToken+")")
	fs.StringVar(&o.CAFile, "nats-ca-file", o.CAFile, "PEM file of the CAs that sign the NATS server's certificate; set, the connection is TLS")
	fs.StringVar(&o.CertFile, "nats-client-cert-file", o.CertFile, "client certificate (PEM) for a NATS server that verifies clients; needs --nats-client-key-file")
	fs.StringVar(&o.KeyFile, "nats-client-key-file", o.KeyFile, "private key (PEM) of --nats-client-cert-file")
}

// Validate checks the flags; required says the service cannot run
// without NATS.
func (o *ConnOptions) Validate(required bool) []error {
	var errs []error
	if required && o.URL == "" {
		errs = append(errs, errors.New("--nats-url is required"))
	}
	var set []string
	for flag, v := range map[string]string{"--nats-nkey-file": o.NKeyFile, "--nats-creds": o.Creds, "--nats-token-file": o.TokenFile, EnvToken: os.Getenv(EnvToken)} {
		if v != "" {
			set = append(set, flag)
		}
	}
	slices.Sort(set)
	if len(set) > 1 {
		errs = append(errs, fmt.Errorf("NATS credentials come from one of --nats-nkey-file, --nats-creds, --nats-token-file and %s; got %s", EnvToken, strings.Join(set, ", ")))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("--nats-client-cert-file and --nats-client-key-file go together"))
	}
	for flag, v := range map[string]string{"--nats-ca-file": o.CAFile, "--nats-client-cert-file": o.CertFile} {
		if v != "" {
			set = append(set, flag)
		}
	}
	slices.Sort(set)
	if len(set) > 0 && o.URL == "" {
		errs = append(errs, fmt.Errorf("%s need --nats-url", strings.Join(set, ", ")))
	}
	return errs
}

// Connect connects as the service whose connections are named name (a
// kplane.dev/proto/access ClientName), with its own inbox prefix so that
// its replies reach it alone. The connection retries in the background
// (NATS may start after the service) and reconnects for ever; extra
// options are applied last.
func (o *ConnOptions) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	svc, ok := access.ByClientName(name)
	if !ok {
		return nil, fmt.Errorf("connect to NATS as %q: no such service in kplane.dev/proto/access", name)
	}
	opts := []nats.Option{
		nats.Name(name), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.CustomInboxPrefix(svc.InboxPrefix()),
	}
	auth, err := o.credentials()
	if err != nil {
		return nil, fmt.Errorf("connect to NATS as %s: %w", name, err)
	}
	opts = append(opts, auth...)
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	if o.CertFile != "" {
		opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s as %s: %w", o.URL, name, err)
	}
	return nc, nil
}

// credentials reads the credential the flags name.
func (o *ConnOptions) credentials() ([]nats.Option, error) {
	switch {
	case o.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("read NKey seed %s: %w", o.NKeyFile, err)
		}
		return []nats.Option{opt}, nil
	case o.Creds != "":
		return []nats.Option{nats.UserCredentials(o.Creds)}, nil
	case o.TokenFile != "":
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("read token: %w", err)
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return nil, fmt.Errorf("token file %s is empty", o.TokenFile)
		}
		return []nats.Option{nats.Token(token)}, nil
	case os.Getenv(EnvToken) != "":
		return []nats.Option{nats.Token(os.Getenv(EnvToken))}, nil
	}
	return nil, nil
}
