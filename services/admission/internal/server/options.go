package server

import (
	goflag "flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/serviceresolver"
	"kplane.dev/libs/serving"
)

// service is how admission serves over HTTPS: health to anyone, metrics
// to a client certificate of --client-ca-file; the reviews travel over
// NATS.
var service = serving.Service{
	Name:             "kplane-admission",
	Address:          "127.0.0.1:6480",
	ClientCAHelp:     "PEM CA bundle that verifies the client certificates of /metrics' readers",
	ClientCARequired: "/metrics is served only to client certificates it verifies",
}

// Options are the flags of the admission service.
type Options struct {
	serving.Options
	NATS natsrpc.ConnOptions
	// Kubeconfig reaches the API (through the gateway) for the informers
	// of the webhook configurations, policies and namespaces; empty means
	// nothing is configurable and every write is admitted.
	Kubeconfig string
	// StartUsers are admitted unasked until the configuration is read.
	StartUsers []string
	// ServiceMap resolves webhook services statically; empty resolves
	// https://<name>.<namespace>.svc:<port>.
	ServiceMap []string
	// PolicyDir and PolicyNamespace are where the operator's Rego
	// admission policies come from.
	PolicyDir       string
	PolicyNamespace string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Options: serving.NewOptions(service),
		// The users the other services write as at start: core's and
		// crd's loopbacks and controllers, and the gateway registering
		// the built-in APIServices.
		PolicyNamespace: "kube-system",
		StartUsers:      []string{"system:kplane:core", "system:kplane:crd", "system:kplane-core", "system:kplane-crd", "system:kplane-gateway"},
	}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs)
	nats := goflag.NewFlagSet("nats", goflag.ContinueOnError)
	o.NATS.AddFlags(nats, "the admission reviews are served on")
	fs.AddGoFlagSet(nats)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the API (the gateway) the webhook configurations, admission policies and namespaces are read from; empty: nothing is configurable and every write is admitted")
	fs.StringSliceVar(&o.StartUsers, "start-users", o.StartUsers, "users (who must also be in system:masters) whose writes are admitted unasked until the configuration has been read: the other services' own writes at start, made before the gateway serves")
	fs.StringVar(&o.PolicyDir, "admission-policy-dir", o.PolicyDir, "directory of Rego admission policies (*.rego, package kplane.admission or below), reloaded when they change; empty for none")
	fs.StringVar(&o.PolicyNamespace, "admission-policy-namespace", o.PolicyNamespace, "namespace whose ConfigMaps labelled kplane.dev/admission-policy=true hold Rego admission policies (read with --kubeconfig)")
	fs.StringSliceVar(&o.ServiceMap, "service-map", o.ServiceMap, "where webhook services live, namespace/name=https://host:port, repeated or comma-separated; empty resolves https://<name>.<namespace>.svc:<port>")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	errs := append(o.Options.Validate(), o.NATS.Validate(true)...)
	if _, err := serviceresolver.ParseMap(o.ServiceMap); err != nil {
		errs = append(errs, fmt.Errorf("--service-map: %w", err))
	}
	return errs
}

// Config is what a Server is built from.
type Config struct {
	serving    *serving.Config
	nats       natsrpc.ConnOptions
	log        *slog.Logger
	api        *rest.Config
	startUsers []string
	resolver   serviceresolver.Resolver
	// policyDir and policyNamespace are where Rego policies come from.
	policyDir, policyNamespace string
}

// Config validates o and returns the configuration of a Server that logs
// to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	sc, err := o.Options.Validated(o.Validate(), logOut)
	if err != nil {
		return nil, err
	}
	c := &Config{serving: sc, nats: o.NATS, log: sc.Log, startUsers: o.StartUsers, resolver: serviceresolver.DNS{},
		policyDir: o.PolicyDir, policyNamespace: o.PolicyNamespace}
	if o.Kubeconfig != "" {
		if c.api, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig); err != nil {
			return nil, fmt.Errorf("read --kubeconfig: %w", err)
		}
	}
	if len(o.ServiceMap) > 0 {
		m, err := serviceresolver.ParseMap(o.ServiceMap)
		if err != nil {
			return nil, fmt.Errorf("parse --service-map: %w", err)
		}
		c.resolver = m.Or(serviceresolver.DNS{})
	}
	return c, nil
}
