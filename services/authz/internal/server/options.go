package server

import (
	goflag "flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kplane.dev/libs/metrics"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/serving"
	"kplane.dev/services/authz/internal/authorizer"
)

// The values of --authorization-mode.
const (
	ModeAlwaysAllow = "AlwaysAllow"
	ModeAlwaysDeny  = "AlwaysDeny"
	ModeRBAC        = "RBAC"
	ModeRego        = "Rego"
	ModeWebhook     = "Webhook"
)

var modes = []string{ModeAlwaysAllow, ModeAlwaysDeny, ModeRBAC, ModeRego, ModeWebhook}

// What a Rego policy that fails at evaluation decides
// (--authorization-policy-failure-mode).
const (
	PolicyFailureDeny      = "Deny"
	PolicyFailureNoOpinion = "NoOpinion"
)

// service is how authz serves: the webhook and metrics to callers with a
// client certificate of --client-ca-file, health to anyone.
var service = serving.Service{
	Name:             "kplane-authz",
	Address:          "127.0.0.1:6460",
	ClientCAHelp:     "PEM CA bundle that verifies the client certificates of webhook callers",
	ClientCARequired: "without it no webhook caller can be trusted",
}

// Options are the flags of the authz service.
type Options struct {
	serving.Options

	NATS natsrpc.ConnOptions
	// Kubeconfig reaches the API (through the gateway) for the informers.
	Kubeconfig string

	AuthorizationModes     []string
	PolicyDir              string
	PolicyNamespace        string
	PolicyFailureMode      string
	WebhookConfigFile      string
	WebhookVersion         string
	WebhookAuthorizedTTL   time.Duration
	WebhookUnauthorizedTTL time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Options:                serving.NewOptions(service),
		AuthorizationModes:     []string{ModeRego, ModeRBAC},
		PolicyNamespace:        "kube-system",
		PolicyFailureMode:      PolicyFailureDeny,
		WebhookVersion:         "v1",
		WebhookAuthorizedTTL:   authorizer.DefaultAuthorizedTTL,
		WebhookUnauthorizedTTL: authorizer.DefaultUnauthorizedTTL,
	}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs)
	nats := goflag.NewFlagSet("nats", goflag.ContinueOnError)
	o.NATS.AddFlags(nats, "the reviews are served on")
	fs.AddGoFlagSet(nats)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API (the gateway) the informers read RBAC objects, namespaces and policy ConfigMaps from")
	fs.StringSliceVar(&o.AuthorizationModes, "authorization-mode", o.AuthorizationModes, "ordered list of authorization modes: "+fmt.Sprint(modes))
	fs.StringVar(&o.PolicyDir, "authorization-policy-dir", o.PolicyDir, "directory of Rego policies (*.rego), reloaded on change")
	fs.StringVar(&o.PolicyFailureMode, "authorization-policy-failure-mode", o.PolicyFailureMode,
		"what a Rego policy that fails at evaluation decides: Deny (the default), or NoOpinion, which lets the next mode decide and so lets a broken policy open what it guards")
	fs.StringVar(&o.PolicyNamespace, "authorization-policy-namespace", o.PolicyNamespace, "namespace whose ConfigMaps labelled kplane.dev/authorization-policy=true hold Rego policies")
	fs.StringVar(&o.WebhookConfigFile, "authorization-webhook-config-file", o.WebhookConfigFile, "kubeconfig-format file of the SubjectAccessReview webhook (mode Webhook)")
	fs.StringVar(&o.WebhookVersion, "authorization-webhook-version", o.WebhookVersion, "version of authorization.k8s.io SubjectAccessReview sent to the webhook: v1")
	fs.DurationVar(&o.WebhookAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", o.WebhookAuthorizedTTL, "how long allowed webhook answers are cached")
	fs.DurationVar(&o.WebhookUnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", o.WebhookUnauthorizedTTL, "how long other webhook answers are cached")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	errs := o.Options.Validate()
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	errs = append(errs, o.NATS.Validate(true)...)
	if o.Kubeconfig == "" {
		add("--kubeconfig is required: authz reads RBAC objects from the API")
	}
	if len(o.AuthorizationModes) == 0 {
		add("--authorization-mode: at least one mode is required")
	}
	for i, m := range o.AuthorizationModes {
		if !slices.Contains(modes, m) {
			add("--authorization-mode: unknown mode %q, want one of %v", m, modes)
		}
		if slices.Contains(o.AuthorizationModes[:i], m) {
			add("--authorization-mode: %q given twice", m)
		}
	}
	webhook := slices.Contains(o.AuthorizationModes, ModeWebhook)
	if webhook && o.WebhookConfigFile == "" {
		add("--authorization-webhook-config-file is required with mode Webhook")
	}
	if !webhook && o.WebhookConfigFile != "" {
		add("--authorization-webhook-config-file needs mode Webhook")
	}
	if o.WebhookVersion != "v1" {
		add("--authorization-webhook-version: want v1, got %q", o.WebhookVersion)
	}
	if o.WebhookAuthorizedTTL < 0 || o.WebhookUnauthorizedTTL < 0 {
		add("--authorization-webhook-cache-*-ttl: must not be negative")
	}
	if o.PolicyFailureMode != PolicyFailureDeny && o.PolicyFailureMode != PolicyFailureNoOpinion {
		add("--authorization-policy-failure-mode must be %s or %s, got %q", PolicyFailureDeny, PolicyFailureNoOpinion, o.PolicyFailureMode)
	}
	if o.PolicyNamespace == "" {
		add("--authorization-policy-namespace is required")
	}
	if o.PolicyDir != "" {
		if fi, err := os.Stat(o.PolicyDir); err != nil || !fi.IsDir() {
			add("--authorization-policy-dir: %q is not a readable directory", o.PolicyDir)
		}
	}
	return errs
}

// Config is what a Server is built from: validated options with the files
// they name loaded.
type Config struct {
	serving *serving.Config

	nats natsrpc.ConnOptions
	api  *restclient.Config

	modes           []string
	policyDir       string
	policyNamespace string
	policyFailOpen  bool
	webhook         *restclient.Config
	webhookTTLs     [2]time.Duration

	log *slog.Logger
	// Registry is where the server's metrics are registered and what
	// /metrics serves.
	Registry *prometheus.Registry
}

// Config validates o, loads the certificates and kubeconfigs it names, and
// returns the configuration of a Server that logs to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	sc, err := o.Options.Validated(o.Validate(), logOut)
	if err != nil {
		return nil, err
	}
	c := &Config{
		serving:         sc,
		nats:            o.NATS,
		modes:           slices.Clone(o.AuthorizationModes),
		policyDir:       o.PolicyDir,
		policyNamespace: o.PolicyNamespace,
		policyFailOpen:  o.PolicyFailureMode == PolicyFailureNoOpinion,
		webhookTTLs:     [2]time.Duration{o.WebhookAuthorizedTTL, o.WebhookUnauthorizedTTL},
		log:             sc.Log,
	}
	if c.Registry, err = metrics.NewRegistry(); err != nil {
		return nil, err
	}
	if c.api, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig); err != nil {
		return nil, fmt.Errorf("load --kubeconfig: %w", err)
	}
	if o.WebhookConfigFile != "" {
		if c.webhook, err = authorizer.LoadWebhookConfig(o.WebhookConfigFile); err != nil {
			return nil, fmt.Errorf("load --authorization-webhook-config-file: %w", err)
		}
	}
	return c, nil
}
