package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/pki"
	"kplane.dev/libs/serviceresolver"
	"kplane.dev/libs/serving"

	auditoptions "kplane.dev/services/gateway/internal/audit/options"
	"kplane.dev/services/gateway/internal/authn"
	"kplane.dev/services/gateway/internal/authz"
	"kplane.dev/services/gateway/internal/availability"
	"kplane.dev/services/gateway/internal/discovery"
	"kplane.dev/services/gateway/internal/filters"
)

// service is how the gateway serves: to everyone, with client
// certificates of --client-ca-file, if given, as one way to authenticate;
// its filters shut it down, with their own --shutdown-delay-duration.
var service = serving.Service{
	Name:             "kplane-gateway",
	Address:          "127.0.0.1:6443",
	ClientCAHelp:     "PEM CA bundle that verifies client certificates (CN is the user, O the groups)",
	OwnShutdownDelay: true,
}

// Options are the flags of the gateway. A client may present no
// certificate of --client-ca-file and authenticate with a bearer token
// instead.
type Options struct {
	serving.Options

	// RequestHeader is kube's request-header (front proxy) authentication.
	RequestHeader RequestHeaderOptions
	// APIAudiences are sent with every token review.
	APIAudiences []string
	// AnonymousAuth lets requests without credentials in as
	// system:anonymous.
	AnonymousAuth bool
	// AuthorizedTTL and UnauthorizedTTL are how long authz's decisions are
	// cached.
	AuthorizedTTL   time.Duration
	UnauthorizedTTL time.Duration
	// NATS reaches authn and authz.
	NATS natsrpc.ConnOptions

	// ProxyClientCertFile and ProxyClientKeyFile are the gateway's client
	// certificate towards backends, the one they trust identity headers
	// from.
	ProxyClientCertFile string
	ProxyClientKeyFile  string
	// BackendCAFile verifies the serving certificates of core replicas.
	BackendCAFile string
	// CoreURLs are the core replicas.
	CoreURLs []string
	// CRDURLs are the crd replicas; empty serves no custom resources.
	CRDURLs []string
	// ServiceMap resolves APIService services statically; empty resolves
	// them through cluster DNS.
	ServiceMap []string

	// Filters are the request limits and the shutdown delay, with kube's
	// flags; ShutdownTimeout is the serving options'.
	Filters filters.Config
	// DocumentsInterval is how often discovery and OpenAPI documents are
	// fetched again when no route changed.
	DocumentsInterval time.Duration
	// AvailabilityInterval is how often every APIService's server is
	// probed when no route changed.
	AvailabilityInterval time.Duration
	// Audit is kube's audit policy and backends.
	Audit *auditoptions.Options
	// ShareWatches lets identical watches of core and crd share one
	// upstream watch.
	ShareWatches bool
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Options:              serving.NewOptions(service),
		RequestHeader:        defaultRequestHeader(),
		APIAudiences:         []string{authn.DefaultAudience},
		AnonymousAuth:        true,
		AuthorizedTTL:        authz.DefaultAuthorizedTTL,
		UnauthorizedTTL:      authz.DefaultUnauthorizedTTL,
		CoreURLs:             []string{"https://127.0.0.1:6444"},
		Filters:              filters.DefaultConfig(),
		DocumentsInterval:    discovery.DefaultInterval,
		AvailabilityInterval: availability.DefaultInterval,
		Audit:                auditoptions.NewOptions(),
		ShareWatches:         true,
	}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs)
	o.RequestHeader.AddFlags(fs)
	fs.StringSliceVar(&o.APIAudiences, "api-audiences", o.APIAudiences, "audiences of the API: a bearer token must be meant for one of them; sent with every token review")
	fs.BoolVar(&o.AnonymousAuth, "anonymous-auth", o.AnonymousAuth, "let requests without credentials in as system:anonymous (group system:unauthenticated), which authorization then decides on")
	fs.DurationVar(&o.AuthorizedTTL, "authorization-cache-authorized-ttl", o.AuthorizedTTL, "how long an allowed decision of the authz service is reused")
	fs.DurationVar(&o.UnauthorizedTTL, "authorization-cache-unauthorized-ttl", o.UnauthorizedTTL, "how long a refused decision of the authz service is reused")
	natsFlags := flag.NewFlagSet("nats", flag.ContinueOnError)
	o.NATS.AddFlags(natsFlags, "to reach the authn and authz services")
	fs.AddGoFlagSet(natsFlags)
	fs.StringVar(&o.ProxyClientCertFile, "proxy-client-cert-file", o.ProxyClientCertFile, "PEM client certificate the gateway presents to backends (CN front-proxy-client)")
	fs.StringVar(&o.ProxyClientKeyFile, "proxy-client-key-file", o.ProxyClientKeyFile, "PEM private key of --proxy-client-cert-file")
	fs.StringVar(&o.BackendCAFile, "backend-ca-file", o.BackendCAFile, "PEM CA bundle that verifies the serving certificates of core replicas")
	fs.StringSliceVar(&o.CoreURLs, "core-url", o.CoreURLs, "https URL of core: one replica, or a name resolving to every replica (re-resolved as they come and go); repeat or separate with commas for several")
	fs.StringSliceVar(&o.CRDURLs, "crd-url", o.CRDURLs, "https URL of crd (one replica, or a name resolving to every replica), which serves apiextensions.k8s.io and custom resources; repeat or separate with commas for several; empty serves neither")
	fs.StringSliceVar(&o.ServiceMap, "service-map", o.ServiceMap, "where APIService services live, namespace/name=https://host:port, repeated or comma-separated; empty resolves https://<name>.<namespace>.svc:<port>")
	o.Filters.AddFlags(fs)
	fs.DurationVar(&o.DocumentsInterval, "discovery-interval", o.DocumentsInterval, "how often the discovery and OpenAPI documents are fetched from the backends again when no APIService changed")
	fs.DurationVar(&o.AvailabilityInterval, "apiservice-probe-interval", o.AvailabilityInterval, "how often the server of every APIService is probed to keep its Available condition")
	o.Audit.AddFlags(fs)
	fs.BoolVar(&o.ShareWatches, "share-watches", o.ShareWatches, "let watches of core and crd that ask for the same stream (path, selectors, JSON, resourceVersion 0 or one the stream has passed) share one upstream watch; false gives every watch its own")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	errs := o.Options.Validate()
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, o.RequestHeader.Validate()...)
	errs = append(errs, o.NATS.Validate(true)...)
	if len(o.APIAudiences) == 0 {
		add("--api-audiences: at least one audience is required")
	}
	if o.AuthorizedTTL <= 0 {
		add("--authorization-cache-authorized-ttl: must be positive, got %v", o.AuthorizedTTL)
	}
	if o.UnauthorizedTTL <= 0 {
		add("--authorization-cache-unauthorized-ttl: must be positive, got %v", o.UnauthorizedTTL)
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
	for _, s := range o.CRDURLs {
		if u, err := url.Parse(s); err != nil || u.Scheme != "https" || u.Host == "" {
			add("--crd-url: %q is not an https URL", s)
		}
	}
	if _, err := serviceresolver.ParseMap(o.ServiceMap); err != nil {
		add("--service-map: %w", err)
	}
	if o.DocumentsInterval <= 0 {
		add("--discovery-interval: must be positive, got %v", o.DocumentsInterval)
	}
	if o.AvailabilityInterval <= 0 {
		add("--apiservice-probe-interval: must be positive, got %v", o.AvailabilityInterval)
	}
	f := o.filters()
	errs = append(errs, f.Validate()...)
	errs = append(errs, o.Audit.Validate()...)
	return errs
}

// Config is what a Server is built from: validated options with the files
// they name loaded.
type Config struct {
	// serving's ClientCA is nil when only tokens authenticate.
	serving *serving.Config
	// handshakeCAs are the CAs the TLS handshake names to clients, so
	// that they pick a certificate an authenticator accepts: the client
	// CA's and the front proxies'. Nil when neither is set.
	handshakeCAs *x509.CertPool
	// requestHeader is nil without --requestheader-client-ca-file.
	requestHeader        *authn.RequestHeader
	apiAudiences         []string
	anonymous            bool
	authorizedTTL        time.Duration
	unauthorizedTTL      time.Duration
	nats                 natsrpc.ConnOptions
	proxyClient          tls.Certificate
	backendCA            *x509.CertPool
	coreURLs             []*url.URL
	crdURLs              []*url.URL
	resolver             serviceresolver.Resolver
	filters              filters.Config
	documentsInterval    time.Duration
	availabilityInterval time.Duration
	audit                *auditoptions.Options
	shareWatches         bool
	log                  *slog.Logger
}

// Config validates o, loads the files it names and returns the
// configuration of a Server that logs to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	sc, err := o.Options.Validated(o.Validate(), logOut)
	if err != nil {
		return nil, err
	}
	c := &Config{
		serving:              sc,
		filters:              o.filters(),
		documentsInterval:    o.DocumentsInterval,
		availabilityInterval: o.AvailabilityInterval,
		log:                  sc.Log,
		resolver:             serviceresolver.DNS{},
		apiAudiences:         o.APIAudiences,
		anonymous:            o.AnonymousAuth,
		authorizedTTL:        o.AuthorizedTTL,
		unauthorizedTTL:      o.UnauthorizedTTL,
		nats:                 o.NATS,
		audit:                o.Audit,
		shareWatches:         o.ShareWatches,
	}
	if c.requestHeader, err = o.RequestHeader.config(); err != nil {
		return nil, err
	}
	if c.handshakeCAs, err = loadPools(o.ClientCAFile, o.RequestHeader.ClientCAFile); err != nil {
		return nil, err
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
	for _, s := range o.CRDURLs {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("parse --crd-url: %w", err)
		}
		c.crdURLs = append(c.crdURLs, u)
	}
	if len(o.ServiceMap) > 0 {
		if c.resolver, err = serviceresolver.ParseMap(o.ServiceMap); err != nil {
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

// RequestHeaderOptions are kube's request-header authentication flags.
type RequestHeaderOptions struct {
	ClientCAFile        string
	AllowedNames        []string
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// defaultRequestHeader names the headers kube's front proxies
// conventionally set; with no --requestheader-client-ca-file they are
// not read.
func defaultRequestHeader() RequestHeaderOptions {
	h := frontproxy.DefaultHeaders()
	return RequestHeaderOptions{
		UsernameHeaders:     h.User,
		UIDHeaders:          h.UID,
		GroupHeaders:        h.Group,
		ExtraHeaderPrefixes: h.ExtraPrefixes,
	}
}

// AddFlags binds o to fs with kube-apiserver's flag names.
func (o *RequestHeaderOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClientCAFile, "requestheader-client-ca-file", o.ClientCAFile, "PEM CA bundle that verifies the client certificates of front proxies; their request headers then name the user (empty: request headers are not read)")
	fs.StringSliceVar(&o.AllowedNames, "requestheader-allowed-names", o.AllowedNames, "client certificate common names a front proxy may have; required with --requestheader-client-ca-file")
	fs.StringSliceVar(&o.UsernameHeaders, "requestheader-username-headers", o.UsernameHeaders, "request headers to read the user name from; the first one set wins")
	fs.StringSliceVar(&o.UIDHeaders, "requestheader-uid-headers", o.UIDHeaders, "request headers to read the user's uid from; the first one set wins")
	fs.StringSliceVar(&o.GroupHeaders, "requestheader-group-headers", o.GroupHeaders, "request headers to read the user's groups from, every value of every one")
	fs.StringSliceVar(&o.ExtraHeaderPrefixes, "requestheader-extra-headers-prefix", o.ExtraHeaderPrefixes, "request header prefixes of the user's extra attributes")
}

// Validate reports every problem with o.
func (o *RequestHeaderOptions) Validate() []error {
	if o.ClientCAFile == "" {
		return nil
	}
	var errs []error
	if len(o.UsernameHeaders) == 0 {
		errs = append(errs, errors.New("--requestheader-username-headers: at least one header is required with --requestheader-client-ca-file"))
	}
	if !slices.ContainsFunc(o.AllowedNames, func(n string) bool { return strings.TrimSpace(n) != "" }) {
		errs = append(errs, errors.New("--requestheader-allowed-names: at least one name is required with --requestheader-client-ca-file; an empty list would let any certificate that CA verifies name any user"))
	}
	for _, n := range o.AllowedNames {
		if strings.TrimSpace(n) == "" {
			errs = append(errs, errors.New("--requestheader-allowed-names: empty name"))
			break
		}
	}
	return errs
}

// config loads the CA of o; nil when request headers are not read.
func (o *RequestHeaderOptions) config() (*authn.RequestHeader, error) {
	if o.ClientCAFile == "" {
		return nil, nil
	}
	ca, err := pki.LoadPool(o.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("load --requestheader-client-ca-file: %w", err)
	}
	return &authn.RequestHeader{
		ClientCA:     ca,
		AllowedNames: slices.Clone(o.AllowedNames),
		Headers: frontproxy.Headers{
			User:          o.UsernameHeaders,
			UID:           o.UIDHeaders,
			Group:         o.GroupHeaders,
			ExtraPrefixes: o.ExtraHeaderPrefixes,
		},
	}, nil
}

// loadPools is one pool of the certificates of the PEM files given; nil
// when none is.
func loadPools(files ...string) (*x509.CertPool, error) {
	var pool *x509.CertPool
	for _, f := range files {
		if f == "" {
			continue
		}
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CA bundle: %w", err)
		}
		if pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", f)
		}
	}
	return pool, nil
}
