package server

import (
	"crypto"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/pki"
	"kplane.dev/libs/serving"
	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/cache"
	"kplane.dev/services/authn/internal/authenticator/oidc"
	"kplane.dev/services/authn/internal/authenticator/serviceaccount"
	"kplane.dev/services/authn/internal/authenticator/tokenfile"
	"kplane.dev/services/authn/internal/authenticator/webhook"
)

// DefaultIssuer is kube's in-cluster issuer and the default API audience.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// maxTokenSeconds is kube's upper bound of a token's lifetime (2^32 s).
const maxTokenSeconds = 1 << 32

// service is how authn serves: the TokenReview webhook to callers with a
// client certificate of --client-ca-file, health and metrics to anyone.
var service = serving.Service{
	Name:             "kplane-authn",
	Address:          "127.0.0.1:6450",
	ClientCAHelp:     "PEM CA bundle; TokenReview webhook callers must present a client certificate it verifies",
	ClientCARequired: "webhook callers are known by their client certificate",
}

// Options are the flags of the authn service.
type Options struct {
	serving.Options

	NATS natsrpc.ConnOptions

	// Kubeconfig reaches the API (through the gateway) for the informers.
	Kubeconfig string

	TokenAuthFile string

	ServiceAccountIssuers        []string
	ServiceAccountSigningKeyFile string
	ServiceAccountKeyFiles       []string
	APIAudiences                 []string
	ServiceAccountMaxExpiration  time.Duration
	ServiceAccountExtendExpiry   bool
	ServiceAccountLookup         bool
	EnableBootstrapTokenAuth     bool
	TokenCacheSuccessTTL         time.Duration
	TokenCacheFailureTTL         time.Duration
	TokenWebhookConfigFile       string
	TokenWebhookCacheTTL         time.Duration
	OIDC                         OIDCOptions
}

// OIDCOptions are kube's --oidc-* flags.
type OIDCOptions struct {
	IssuerURL      string
	ClientID       string
	CAFile         string
	UsernameClaim  string
	UsernamePrefix string
	GroupsClaim    string
	GroupsPrefix   string
	RequiredClaims []string // key=value
	SigningAlgs    []string
}

// NewOptions returns the defaults, kube-apiserver's where it has the flag.
func NewOptions() *Options {
	o := &Options{
		Options:                    serving.NewOptions(service),
		ServiceAccountIssuers:      []string{DefaultIssuer},
		ServiceAccountExtendExpiry: true,
		ServiceAccountLookup:       true,
		EnableBootstrapTokenAuth:   true,
		TokenCacheSuccessTTL:       cache.DefaultSuccessTTL,
		TokenCacheFailureTTL:       cache.DefaultFailureTTL,
		TokenWebhookCacheTTL:       webhook.DefaultCacheTTL,
		OIDC: OIDCOptions{
			UsernameClaim: oidc.DefaultUsernameClaim,
			SigningAlgs:   []string{"RS256"},
		},
	}
	o.ShutdownTimeout = 30 * time.Second
	return o
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs)
	gofs := flag.NewFlagSet("nats", flag.ContinueOnError)
	o.NATS.AddFlags(gofs, "that TokenReviews and TokenRequests arrive on (required)")
	fs.AddGoFlagSet(gofs)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API (the gateway) that service accounts and secrets are read from")
	fs.StringVar(&o.TokenAuthFile, "token-auth-file", o.TokenAuthFile, "static tokens, in kube's CSV format (token,user,uid,\"group1,group2\")")
	fs.StringSliceVar(&o.ServiceAccountIssuers, "service-account-issuer", o.ServiceAccountIssuers, "issuer of service account tokens; repeatable: the first signs, all are accepted")
	fs.StringVar(&o.ServiceAccountSigningKeyFile, "service-account-signing-key-file", o.ServiceAccountSigningKeyFile, "PEM private key (RSA or ECDSA) that signs service account tokens")
	fs.StringArrayVar(&o.ServiceAccountKeyFiles, "service-account-key-file", o.ServiceAccountKeyFiles, "PEM public keys, certificates or private keys that verify service account tokens; repeatable. Default: the signing key")
	fs.StringSliceVar(&o.APIAudiences, "api-audiences", o.APIAudiences, "audiences of the API; default: the service account issuers")
	fs.DurationVar(&o.ServiceAccountMaxExpiration, "service-account-max-token-expiration", o.ServiceAccountMaxExpiration, "longest lifetime of a requested token; 0 means no limit")
	fs.BoolVar(&o.ServiceAccountExtendExpiry, "service-account-extend-token-expiration", o.ServiceAccountExtendExpiry, "give pod-bound tokens of the default 3607s a year, warning after 3607s, as kube does")
	fs.BoolVar(&o.ServiceAccountLookup, "service-account-lookup", o.ServiceAccountLookup, "check that a token's service account exists; false allows running without --kubeconfig, and then service account tokens are not accepted (with --kubeconfig they are always checked)")
	fs.BoolVar(&o.EnableBootstrapTokenAuth, "enable-bootstrap-token-auth", o.EnableBootstrapTokenAuth, "accept bootstrap tokens (Secrets of type bootstrap.kubernetes.io/token in kube-system)")
	fs.DurationVar(&o.TokenCacheSuccessTTL, "token-cache-success-ttl", o.TokenCacheSuccessTTL, "how long an accepted token is remembered; 0 disables")
	fs.DurationVar(&o.TokenCacheFailureTTL, "token-cache-failure-ttl", o.TokenCacheFailureTTL, "how long a refused token is remembered; 0 disables")
	fs.StringVar(&o.TokenWebhookConfigFile, "authentication-token-webhook-config-file", o.TokenWebhookConfigFile, "kubeconfig-format file of a TokenReview webhook to ask about tokens")
	fs.DurationVar(&o.TokenWebhookCacheTTL, "authentication-token-webhook-cache-ttl", o.TokenWebhookCacheTTL, "how long the webhook's answers are remembered")
	fs.StringVar(&o.OIDC.IssuerURL, "oidc-issuer-url", o.OIDC.IssuerURL, "https URL of an OpenID Connect issuer whose ID tokens are accepted")
	fs.StringVar(&o.OIDC.ClientID, "oidc-client-id", o.OIDC.ClientID, "client id that ID tokens must be issued for (required with --oidc-issuer-url)")
	fs.StringVar(&o.OIDC.CAFile, "oidc-ca-file", o.OIDC.CAFile, "PEM CA bundle that verifies the OIDC issuer; default: the system's")
	fs.StringVar(&o.OIDC.UsernameClaim, "oidc-username-claim", o.OIDC.UsernameClaim, "ID token claim used as the user name")
	fs.StringVar(&o.OIDC.UsernamePrefix, "oidc-username-prefix", o.OIDC.UsernamePrefix, "prefix of user names; unset: \"<issuer-url>#\" unless the claim is email; \"-\" disables")
	fs.StringVar(&o.OIDC.GroupsClaim, "oidc-groups-claim", o.OIDC.GroupsClaim, "ID token claim (string or array) used as the user's groups")
	fs.StringVar(&o.OIDC.GroupsPrefix, "oidc-groups-prefix", o.OIDC.GroupsPrefix, "prefix of groups")
	fs.StringArrayVar(&o.OIDC.RequiredClaims, "oidc-required-claim", o.OIDC.RequiredClaims, "key=value that an ID token must carry; repeatable")
	fs.StringSliceVar(&o.OIDC.SigningAlgs, "oidc-signing-algs", o.OIDC.SigningAlgs, "accepted ID token signature algorithms")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	errs := o.Options.Validate()
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, o.NATS.Validate(true)...)
	if o.Kubeconfig == "" && (o.ServiceAccountLookup || o.EnableBootstrapTokenAuth) {
		add("--kubeconfig is required unless --service-account-lookup=false and --enable-bootstrap-token-auth=false")
	}
	if len(o.ServiceAccountIssuers) == 0 {
		add("--service-account-issuer is required")
	}
	for _, iss := range o.ServiceAccountIssuers {
		if strings.Contains(iss, ":") {
			if _, err := url.Parse(iss); err != nil {
				add("--service-account-issuer %q: %w", iss, err)
			}
		}
		if iss == "" {
			add("--service-account-issuer: empty issuer")
		}
	}
	if o.ServiceAccountSigningKeyFile == "" {
		add("--service-account-signing-key-file is required")
	}
	if m := o.ServiceAccountMaxExpiration; m != 0 && (m < time.Hour || m > maxTokenSeconds*time.Second) {
		add("the service-account-max-token-expiration must be between 1 hour and 2^32 seconds")
	}
	if o.TokenCacheSuccessTTL < 0 || o.TokenCacheFailureTTL < 0 || o.TokenWebhookCacheTTL < 0 {
		add("cache TTLs must not be negative")
	}
	if o.OIDC.IssuerURL != "" {
		if !strings.HasPrefix(o.OIDC.IssuerURL, "https://") {
			add("--oidc-issuer-url must be an https URL, got %q", o.OIDC.IssuerURL)
		}
		if o.OIDC.ClientID == "" {
			add("--oidc-client-id is required with --oidc-issuer-url")
		}
		if o.OIDC.UsernameClaim == "" {
			add("--oidc-username-claim must not be empty")
		}
	}
	if _, err := requiredClaims(o.OIDC.RequiredClaims); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func requiredClaims(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--oidc-required-claim: want key=value, got %q", kv)
		}
		out[k] = v
	}
	return out, nil
}

// Config is what a Server is built from: validated options with the files
// they name loaded.
type Config struct {
	serving *serving.Config
	nats    natsrpc.ConnOptions
	// api is nil when nothing needs the API.
	api *restclient.Config

	tokenFile        *tokenfile.Authenticator
	issuers          []string
	signer           *serviceaccount.Signer
	keys             *serviceaccount.StaticKeys
	publicKeys       []serviceaccount.PublicKey
	apiAuds          authenticator.Audiences
	maxExpiration    time.Duration
	extendExpiration bool
	lookup           bool
	bootstrap        bool

	successTTL, failureTTL time.Duration
	webhook                *webhook.Authenticator
	webhookTTL             time.Duration
	oidc                   *oidc.Authenticator

	log *slog.Logger
}

// Config validates o, loads what it names, and returns the configuration of
// a Server that logs to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	sc, err := o.Options.Validated(o.Validate(), logOut)
	if err != nil {
		return nil, err
	}
	c := &Config{
		serving:          sc,
		nats:             o.NATS,
		issuers:          append([]string(nil), o.ServiceAccountIssuers...),
		apiAuds:          authenticator.Audiences(o.APIAudiences),
		maxExpiration:    o.ServiceAccountMaxExpiration,
		extendExpiration: o.ServiceAccountExtendExpiry,
		bootstrap:        o.EnableBootstrapTokenAuth,
		successTTL:       o.TokenCacheSuccessTTL,
		failureTTL:       o.TokenCacheFailureTTL,
		webhookTTL:       o.TokenWebhookCacheTTL,
		log:              sc.Log,
	}
	if len(c.apiAuds) == 0 {
		c.apiAuds = authenticator.Audiences(c.issuers)
	}
	if o.Kubeconfig != "" {
		if c.api, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig); err != nil {
			return nil, fmt.Errorf("load --kubeconfig: %w", err)
		}
	}
	if o.TokenAuthFile != "" {
		if c.tokenFile, err = tokenfile.NewCSV(o.TokenAuthFile, c.log); err != nil {
			return nil, fmt.Errorf("load --token-auth-file: %w", err)
		}
	}
	signingKey, err := loadSigningKey(o.ServiceAccountSigningKeyFile)
	if err != nil {
		return nil, err
	}
	if c.signer, err = serviceaccount.NewSigner(c.issuers[0], signingKey); err != nil {
		return nil, err
	}
	pubs := []crypto.PublicKey{signingKey.Public()}
	if len(o.ServiceAccountKeyFiles) > 0 {
		if pubs, err = loadPublicKeys(o.ServiceAccountKeyFiles); err != nil {
			return nil, err
		}
	}
	if c.keys, err = serviceaccount.NewStaticKeys(pubs...); err != nil {
		return nil, fmt.Errorf("verification keys: %w", err)
	}
	c.publicKeys = c.keys.PublicKeys("")
	if o.TokenWebhookConfigFile != "" {
		if c.webhook, err = webhook.NewFromFile(o.TokenWebhookConfigFile, c.apiAuds); err != nil {
			return nil, err
		}
	}
	if o.OIDC.IssuerURL != "" {
		var ca *x509.CertPool
		if o.OIDC.CAFile != "" {
			if ca, err = pki.LoadPool(o.OIDC.CAFile); err != nil {
				return nil, fmt.Errorf("load --oidc-ca-file: %w", err)
			}
		}
		required, _ := requiredClaims(o.OIDC.RequiredClaims)
		if c.oidc, err = oidc.New(oidc.Options{
			IssuerURL:      o.OIDC.IssuerURL,
			ClientID:       o.OIDC.ClientID,
			CA:             ca,
			UsernameClaim:  o.OIDC.UsernameClaim,
			UsernamePrefix: o.OIDC.UsernamePrefix,
			GroupsClaim:    o.OIDC.GroupsClaim,
			GroupsPrefix:   o.OIDC.GroupsPrefix,
			RequiredClaims: required,
			SigningAlgs:    o.OIDC.SigningAlgs,
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}
