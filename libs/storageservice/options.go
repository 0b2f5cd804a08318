package storageservice

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/pki"
	"kplane.dev/libs/serving"
	"kplane.dev/libs/storage/compactor"
)

// ClientCAHelp is the help of a storage service's --client-ca-file.
const ClientCAHelp = "PEM CA bundle that verifies the gateway's client certificate; only it may send identity headers"

// ClientCARequired says why a storage service needs --client-ca-file.
const ClientCARequired = "without it no request can be trusted"

// Options are the flags every storage service shares. A service embeds
// them in its own options.
type Options struct {
	serving.Options

	// RequestHeaderAllowedNames are the CNs the gateway's certificate may
	// carry.
	RequestHeaderAllowedNames []string

	EtcdServers  []string
	EtcdCAFile   string
	EtcdCertFile string
	EtcdKeyFile  string
	EtcdPrefix   string

	NATS natsrpc.ConnOptions
	// ReviewTimeout bounds the wait for another service to answer a
	// review over NATS.
	ReviewTimeout time.Duration

	// Admission asks the admission service (over NATS) about every
	// write, after the service's own admission steps.
	Admission bool

	// APIKubeconfig is the endpoint of the whole API the controllers act
	// through; empty means the service's own loopback.
	APIKubeconfig string

	CompactionInterval time.Duration
}

// NewOptions returns the defaults of the storage service called name
// ("core", "crd") listening on address.
func NewOptions(name, address string) Options {
	return Options{
		Options: serving.NewOptions(serving.Service{
			Name:             "kplane-" + name,
			Address:          address,
			ClientCAHelp:     ClientCAHelp,
			ClientCARequired: ClientCARequired,
		}),
		// One cluster CA signs every client certificate, so trusting any
		// of them would let any client speak for anyone.
		RequestHeaderAllowedNames: []string{frontproxy.ClientName},
		EtcdServers:               []string{"http://127.0.0.1:2379"},
		EtcdPrefix:                "/kplane",
		CompactionInterval:        compactor.DefaultInterval,
		ReviewTimeout:             natsrpc.DefaultTimeout,
	}
}

// AddFlags binds o to fs; natsUsage says what the service uses NATS for.
func (o *Options) AddFlags(fs *pflag.FlagSet, natsUsage string) {
	o.Options.AddFlags(fs)
	fs.StringSliceVar(&o.RequestHeaderAllowedNames, "requestheader-allowed-names", o.RequestHeaderAllowedNames, "common names the gateway's client certificate may carry; at least one is required")
	fs.StringSliceVar(&o.EtcdServers, "etcd-servers", o.EtcdServers, "etcd client URLs")
	fs.StringVar(&o.EtcdCAFile, "etcd-cafile", o.EtcdCAFile, "PEM CA bundle that verifies etcd's serving certificate")
	fs.StringVar(&o.EtcdCertFile, "etcd-certfile", o.EtcdCertFile, "PEM client certificate for etcd")
	fs.StringVar(&o.EtcdKeyFile, "etcd-keyfile", o.EtcdKeyFile, "PEM private key of --etcd-certfile")
	fs.StringVar(&o.EtcdPrefix, "etcd-prefix", o.EtcdPrefix, "etcd key prefix of everything the service stores")
	nats := flag.NewFlagSet("nats", flag.ContinueOnError)
	o.NATS.AddFlags(nats, natsUsage)
	fs.AddGoFlagSet(nats)
	fs.DurationVar(&o.ReviewTimeout, "review-timeout", o.ReviewTimeout, "how long to wait for another service (over NATS) to answer a review")
	fs.BoolVar(&o.Admission, "admission", o.Admission, "ask the admission service (over NATS) about every write: webhooks and policies; a write it cannot be asked about fails with 503. Without it, writes pass the built-in admission steps only")
	fs.StringVar(&o.APIKubeconfig, "api-kubeconfig", o.APIKubeconfig, "kubeconfig of the endpoint that serves the whole API (the gateway) for the controllers; empty: the service's own loopback")
	fs.DurationVar(&o.CompactionInterval, "compaction-interval", o.CompactionInterval, "how often etcd is compacted; 0 disables compaction")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	errs := o.Options.Validate()
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(o.RequestHeaderAllowedNames) == 0 {
		add("--requestheader-allowed-names: at least one name is required; an empty list would let any certificate --client-ca-file verifies name any user")
	}
	for _, n := range o.RequestHeaderAllowedNames {
		if strings.TrimSpace(n) == "" {
			add("--requestheader-allowed-names: empty name")
		}
	}
	if len(o.EtcdServers) == 0 {
		add("--etcd-servers is required")
	}
	for _, s := range o.EtcdServers {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("--etcd-servers: %q is not an http or https URL", s)
		}
	}
	if (o.EtcdCertFile == "") != (o.EtcdKeyFile == "") {
		add("--etcd-certfile and --etcd-keyfile go together")
	}
	if !strings.HasPrefix(o.EtcdPrefix, "/") || strings.HasSuffix(o.EtcdPrefix, "/") {
		add("--etcd-prefix: want a path that starts with / and does not end with /, got %q", o.EtcdPrefix)
	}
	errs = append(errs, o.NATS.Validate(false)...)
	if o.Admission && o.NATS.URL == "" {
		add("--admission needs --nats-url: the admission service is asked over NATS")
	}
	if o.ReviewTimeout <= 0 {
		add("--review-timeout: must be positive, got %v", o.ReviewTimeout)
	}
	if o.CompactionInterval < 0 {
		add("--compaction-interval: must not be negative, got %v", o.CompactionInterval)
	}
	return errs
}

// Config is what a Service is built from: validated options with the
// files they name loaded.
type Config struct {
	Serving      *serving.Config
	AllowedNames []string

	Etcd       clientv3.Config
	EtcdPrefix string

	NATS          natsrpc.ConnOptions
	ReviewTimeout time.Duration
	// Admission asks the admission service about every write.
	Admission bool

	// API is the endpoint controllers use; nil means the loopback.
	API *restclient.Config

	CompactionInterval time.Duration
	Log                *slog.Logger
}

// Config is a service's Config step: errs are the service's whole
// validation (its own and Validate's); with none, it loads the
// certificates and kubeconfig o names and returns a configuration that
// logs to logOut.
func (o *Options) Config(errs []error, logOut io.Writer) (*Config, error) {
	sc, err := o.Options.Validated(errs, logOut)
	if err != nil {
		return nil, err
	}
	c := &Config{
		Serving:            sc,
		AllowedNames:       append([]string(nil), o.RequestHeaderAllowedNames...),
		EtcdPrefix:         o.EtcdPrefix,
		NATS:               o.NATS,
		ReviewTimeout:      o.ReviewTimeout,
		Admission:          o.Admission,
		CompactionInterval: o.CompactionInterval,
		Log:                sc.Log,
	}
	etcdTLS, err := o.etcdTLS()
	if err != nil {
		return nil, err
	}
	c.Etcd = clientv3.Config{
		Endpoints:   append([]string(nil), o.EtcdServers...),
		TLS:         etcdTLS,
		DialTimeout: 10 * time.Second,
		// Dead connections are found within seconds rather than at the
		// next request that hangs.
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
	}
	if o.APIKubeconfig != "" {
		if c.API, err = clientcmd.BuildConfigFromFlags("", o.APIKubeconfig); err != nil {
			return nil, fmt.Errorf("load --api-kubeconfig: %w", err)
		}
		// client-go's default of 5 requests a second, burst 10, held
		// the controllers back: crd's registration of APIServices lagged
		// a CRD's deletion by hundreds of milliseconds after a few
		// syncs, and deleting namespaces one after another slowed to a
		// second each. Kube runs these controllers on its unthrottled
		// loopback (crd's) or at kube-controller-manager's limits
		// (core's); this is above the latter.
		c.API.QPS, c.API.Burst = 50, 100
	}
	return c, nil
}

// etcdTLS is the client TLS of etcd; nil when no https endpoint needs it
// and no TLS file is given.
func (o *Options) etcdTLS() (*tls.Config, error) {
	https := false
	for _, s := range o.EtcdServers {
		https = https || strings.HasPrefix(s, "https://")
	}
	if !https && o.EtcdCAFile == "" && o.EtcdCertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.EtcdCAFile != "" {
		pool, err := pki.LoadPool(o.EtcdCAFile)
		if err != nil {
			return nil, fmt.Errorf("load --etcd-cafile: %w", err)
		}
		cfg.RootCAs = pool
	}
	if o.EtcdCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.EtcdCertFile, o.EtcdKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load etcd client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
