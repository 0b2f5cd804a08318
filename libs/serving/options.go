package serving

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/command"
	"kplane.dev/libs/pki"
	"kplane.dev/libs/profiling"
	"kplane.dev/libs/tracing"
)

// DefaultShutdownTimeout is how long requests in flight may take to
// finish on shutdown, kube's default.
const DefaultShutdownTimeout = 60 * time.Second

// Service is what differs between the services' serving flags.
type Service struct {
	// Name is the service's name in traces (service.name), such as
	// kplane-gateway.
	Name string
	// Address is the default --listen-address.
	Address string
	// ClientCAHelp is the help of --client-ca-file: whose certificates it
	// verifies, and what for.
	ClientCAHelp string
	// ClientCARequired, when set, makes --client-ca-file required and
	// says why; unset, a service without the flag takes no client
	// certificate.
	ClientCARequired string
	// OwnShutdownDelay is for a service that registers
	// --shutdown-delay-duration with the rest of its shutdown sequence
	// (the gateway's filters): Options then neither registers nor checks
	// it, and ShutdownDelay stays unused.
	OwnShutdownDelay bool
}

// Options are the serving flags. A service embeds them in its own options
// and calls AddFlags, Validate and Config from its own.
type Options struct {
	ListenAddress     string
	TLSCertFile       string
	TLSPrivateKeyFile string
	// ClientCAFile verifies client certificates; the handlers verify
	// them, not the TLS handshake (see NewServer).
	ClientCAFile string
	// ShutdownDelay keeps serving, unready, after shutdown begins, so
	// that load balancers stop sending before the listener closes.
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
	LogFormat       string
	LogLevel        string
	// Profiling serves the runtime's profiles under /debug/pprof/, as
	// kube-apiserver does by default; ContentionProfiling also samples
	// block and mutex events.
	Profiling           bool
	ContentionProfiling bool
	Tracing             tracing.Options

	service Service
}

// NewOptions returns the defaults of service s.
func NewOptions(s Service) Options {
	return Options{
		ListenAddress:   s.Address,
		ShutdownTimeout: DefaultShutdownTimeout,
		LogFormat:       command.DefaultLogFormat,
		LogLevel:        command.DefaultLogLevel,
		Profiling:       true,
		Tracing:         tracing.NewOptions(),
		service:         s,
	}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "host:port to serve HTTPS on (port 0 picks a free port; the log line \"serving\" says which)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate (with intermediates)")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "PEM private key of --tls-cert-file")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, o.service.ClientCAHelp)
	if !o.service.OwnShutdownDelay {
		fs.DurationVar(&o.ShutdownDelay, "shutdown-delay-duration", o.ShutdownDelay, "how long to keep serving, with /readyz failing, after a shutdown signal")
	}
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long requests in flight may take to finish on shutdown")
	command.AddLogFormatFlag(fs, &o.LogFormat)
	command.AddLogLevelFlag(fs, &o.LogLevel)
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "serve the Go runtime's profiles under /debug/pprof/ (to the clients that may read /metrics here)")
	fs.BoolVar(&o.ContentionProfiling, "contention-profiling", o.ContentionProfiling, "with --profiling, also sample block and mutex contention, at a small cost on every lock")
	o.Tracing.AddFlags(fs)
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
	if o.ClientCAFile == "" && o.service.ClientCARequired != "" {
		add("--client-ca-file is required: %s", o.service.ClientCARequired)
	}
	if o.ShutdownDelay < 0 {
		add("--shutdown-delay-duration: must not be negative, got %v", o.ShutdownDelay)
	}
	if o.ShutdownTimeout <= 0 {
		add("--shutdown-timeout: must be positive, got %v", o.ShutdownTimeout)
	}
	if err := command.ValidateLogFormat(o.LogFormat); err != nil {
		errs = append(errs, err)
	}
	if _, err := command.ParseLogLevel(o.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	errs = append(errs, o.Tracing.Validate()...)
	return errs
}

// Config is what valid Options configure, with the files they name
// loaded.
type Config struct {
	ListenAddress string
	Certificate   tls.Certificate
	// ClientCA is nil when --client-ca-file is optional and not given.
	ClientCA        *x509.CertPool
	ShutdownDelay   time.Duration
	ShutdownTimeout time.Duration
	Log             *slog.Logger
	// Profiles serves the runtime's profiles under profiling.Path; nil
	// with --profiling=false. The service decides who may read them.
	Profiles http.Handler
	// Tracing is nil when tracing is off; the service shuts it down when
	// it stops.
	Tracing *tracing.Provider
}

// Validated is a service's Config step: errs are the service's whole
// validation (its own and Validate's); with none, it loads o's files.
func (o *Options) Validated(errs []error, logOut io.Writer) (*Config, error) {
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid options: %w", errors.Join(errs...))
	}
	return o.Config(logOut)
}

// Config loads the files that o, which Validate found valid, names, and
// returns a configuration that logs to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	level, err := command.ParseLogLevel(o.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	c := &Config{
		ListenAddress:   o.ListenAddress,
		ShutdownDelay:   o.ShutdownDelay,
		ShutdownTimeout: o.ShutdownTimeout,
		Log:             command.NewLogger(o.LogFormat, level, logOut),
	}
	if o.Profiling {
		c.Profiles = profiling.Handler(o.ContentionProfiling)
	}
	if c.Certificate, err = tls.LoadX509KeyPair(o.TLSCertFile, o.TLSPrivateKeyFile); err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	if o.ClientCAFile != "" {
		if c.ClientCA, err = pki.LoadPool(o.ClientCAFile); err != nil {
			return nil, fmt.Errorf("load --client-ca-file: %w", err)
		}
	}
	tc, err := o.Tracing.Config(os.Getenv)
	if err != nil {
		return nil, err
	}
	if c.Tracing, err = tracing.New(context.Background(), tc, tracing.Resource{Name: o.service.Name, Version: buildVersion()}); err != nil {
		return nil, err
	}
	return c, nil
}

// buildVersion is the version of the main module, "(devel)" for a build
// of a work tree.
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Version
	}
	return ""
}

// Probe asks the replica o configures whether it is ready: GET /readyz on
// its listen address, a wildcard host meaning loopback, over TLS that
// trusts exactly the certificate in --tls-cert-file, the one the replica
// serves. It is the health check of images without a shell.
func (o *Options) Probe(ctx context.Context) error {
	host, port, err := net.SplitHostPort(o.ListenAddress)
	if err != nil {
		return fmt.Errorf("--listen-address: %w", err)
	}
	if port == "0" {
		return errors.New("--listen-address: a replica on a port picked at start cannot be probed")
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	leaf, err := leafCertificate(o.TLSCertFile)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The certificate is pinned rather than verified against a CA:
		// the probe knows exactly what the replica serves, whatever
		// name or CA it was issued for.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], leaf) {
				return errors.New("the replica serves another certificate than --tls-cert-file")
			}
			return nil
		},
	}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(host, port)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// leafCertificate is the DER of the first certificate in file.
func leafCertificate(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("--tls-cert-file %s: no PEM certificate", file)
	}
	return block.Bytes, nil
}

// InternalProfiles is Profiles for the clients whose certificates
// ClientCA verifies, the rule of an internal service's metrics; nil when
// profiling is off.
func (c *Config) InternalProfiles() http.Handler {
	if c.Profiles == nil {
		return nil
	}
	return frontproxy.RequireClientCertificate(c.Profiles, c.ClientCA, c.Log)
}
