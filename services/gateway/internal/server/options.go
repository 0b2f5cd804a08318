package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/libs/command"
	"kplane.dev/libs/pki"

	"kplane.dev/services/gateway/internal/authn"
	"kplane.dev/services/gateway/internal/availability"
	"kplane.dev/services/gateway/internal/discovery"
	"kplane.dev/services/gateway/internal/filters"
	"kplane.dev/services/gateway/internal/routing"
)

// Options are the flags of the gateway.
type Options struct {
	ListenAddress string

	TLSCertFile       string
	TLSPrivateKeyFile string
	// ClientCAFile verifies client certificates; a client may present
	// none and authenticate with a bearer token instead.
	ClientCAFile  string
	TokenAuthFile string

	// ProxyClientCertFile and ProxyClientKeyFile are the gateway's client
	// certificate towards backends, the one they trust identity headers
	// from.
	ProxyClientCertFile string
	ProxyClientKeyFile  string
	// BackendCAFile verifies the serving certificates of core replicas.
	BackendCAFile string
	// CoreURLs are the core replicas.
	CoreURLs []string
	// ServiceMap resolves APIService services statically; empty resolves
	// them through cluster DNS.
	ServiceMap []string

	// Filters are the request limits and the shutdown delay, with kube's
	// flags.
	Filters filters.Config
	// DocumentsInterval is how often discovery and OpenAPI documents are
	// fetched again when no route changed.
	DocumentsInterval time.Duration
	// AvailabilityInterval is how often every APIService's server is
	// probed when no route changed.
	AvailabilityInterval time.Duration

	ShutdownTimeout time.Duration
	LogFormat       string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		ListenAddress:        "127.0.0.1:6443",
		CoreURLs:             []string{"https://127.0.0.1:6444"},
		Filters:              filters.DefaultConfig(),
		DocumentsInterval:    discovery.DefaultInterval,
		AvailabilityInterval: availability.DefaultInterval,
		ShutdownTimeout:      filters.DefaultShutdownTimeout,
		LogFormat:            "text",
	}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "host:port to serve HTTPS on (port 0 picks a free port; the log line \"serving\" says which)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate (with intermediates)")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "PEM private key of --tls-cert-file")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "PEM CA bundle that verifies client certificates (CN is the user, O the groups)")
	fs.StringVar(&o.TokenAuthFile, "token-auth-file", o.TokenAuthFile, "static bearer tokens, kube's CSV format: token,user,uid,\"group1,group2\"")
	fs.StringVar(&o.ProxyClientCertFile, "proxy-client-cert-file", o.ProxyClientCertFile, "PEM client certificate the gateway presents to backends (CN front-proxy-client)")
	fs.StringVar(&o.ProxyClientKeyFile, "proxy-client-key-file", o.ProxyClientKeyFile, "PEM private key of --proxy-client-cert-file")
	fs.StringVar(&o.BackendCAFile, "backend-ca-file", o.BackendCAFile, "PEM CA bundle that verifies the serving certificates of core replicas")
	fs.StringSliceVar(&o.CoreURLs, "core-url", o.CoreURLs, "https URL of a core replica; repeat or separate with commas for several")
	fs.StringSliceVar(&o.ServiceMap, "service-map", o.ServiceMap, "where APIService services live, namespace/name=https://host:port, repeated or comma-separated; empty resolves https://<name>.<namespace>.svc:<port>")
	o.Filters.AddFlags(fs)
	fs.DurationVar(&o.DocumentsInterval, "discovery-interval", o.DocumentsInterval, "how often the discovery and OpenAPI documents are fetched from the backends again when no APIService changed")
	fs.DurationVar(&o.AvailabilityInterval, "apiservice-probe-interval", o.AvailabilityInterval, "how often the server of every APIService is probed to keep its Available condition")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long requests in flight may take to finish on shutdown")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: json or text")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(o.ListenAddress); err != nil {
		add("--listen-address: %w", err)
	}
	if o.TLSCertFile == "" || o.TLSPrivateKeyFile == "" {
		add("--tls-cert-file and --tls-private-key-file are required")
	}
	if o.ClientCAFile == "" && o.TokenAuthFile == "" {
		add("--client-ca-file or --token-auth-file is required: without either nobody can authenticate")
	}
	if o.ProxyClientCertFile == "" || o.ProxyClientKeyFile == "" {
		add("--proxy-client-cert-file and --proxy-client-key-file are required: backends trust identities only from that certificate")
	}
	if o.BackendCAFile == "" {
		add("--backend-ca-file is required")
	}
	if len(o.CoreURLs) == 0 {
		add("--core-url is required")
	}
	for _, s := range o.CoreURLs {
		if u, err := url.Parse(s); err != nil || u.Scheme != "https" || u.Host == "" {
			add("--core-url: %q is not an https URL", s)
		}
	}
	if _, err := routing.ParseServiceMap(o.ServiceMap); err != nil {
		add("--service-map: %w", err)
	}
	if o.ShutdownTimeout <= 0 {
		add("--shutdown-timeout: must be positive, got %v", o.ShutdownTimeout)
	}
	if o.DocumentsInterval <= 0 {
		add("--discovery-interval: must be positive, got %v", o.DocumentsInterval)
	}
	if o.AvailabilityInterval <= 0 {
		add("--apiservice-probe-interval: must be positive, got %v", o.AvailabilityInterval)
	}
	f := o.filters()
	errs = append(errs, f.Validate()...)
	if err := command.ValidateLogFormat(o.LogFormat); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Config is what a Server is built from: validated options with the files
// they name loaded.
type Config struct {
	listenAddress string
	serving       tls.Certificate
	// clientCA is nil when only tokens authenticate.
	clientCA             *x509.CertPool
	tokens               authn.Tokens
	proxyClient          tls.Certificate
	backendCA            *x509.CertPool
	coreURLs             []*url.URL
	resolver             routing.Resolver
	filters              filters.Config
	documentsInterval    time.Duration
	availabilityInterval time.Duration
	log                  *slog.Logger
}

// Config validates o, loads the files it names and returns the
// configuration of a Server that logs to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid options: %w", errors.Join(errs...))
	}
	c := &Config{
		listenAddress:        o.ListenAddress,
		filters:              o.filters(),
		documentsInterval:    o.DocumentsInterval,
		availabilityInterval: o.AvailabilityInterval,
		log:                  command.NewLogger(o.LogFormat, logOut),
		resolver:             routing.DNSResolver{},
	}
	var err error
	if c.serving, err = tls.LoadX509KeyPair(o.TLSCertFile, o.TLSPrivateKeyFile); err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	if o.ClientCAFile != "" {
		if c.clientCA, err = pki.LoadPool(o.ClientCAFile); err != nil {
			return nil, fmt.Errorf("load --client-ca-file: %w", err)
		}
	}
	if o.TokenAuthFile != "" {
		if c.tokens, err = authn.LoadTokenFile(o.TokenAuthFile); err != nil {
			return nil, fmt.Errorf("load --token-auth-file: %w", err)
		}
	}
	if c.proxyClient, err = tls.LoadX509KeyPair(o.ProxyClientCertFile, o.ProxyClientKeyFile); err != nil {
		return nil, fmt.Errorf("load proxy client certificate: %w", err)
	}
	if c.backendCA, err = pki.LoadPool(o.BackendCAFile); err != nil {
		return nil, fmt.Errorf("load --backend-ca-file: %w", err)
	}
	for _, s := range o.CoreURLs {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("parse --core-url: %w", err)
		}
		c.coreURLs = append(c.coreURLs, u)
	}
	if len(o.ServiceMap) > 0 {
		if c.resolver, err = routing.ParseServiceMap(o.ServiceMap); err != nil {
			return nil, fmt.Errorf("parse --service-map: %w", err)
		}
	}
	return c, nil
}

// filters is the filters' configuration: their flags, and the shutdown
// timeout the server's own flag sets.
func (o *Options) filters() filters.Config {
	f := o.Filters
	f.ShutdownTimeout = o.ShutdownTimeout
	return f
}
