package server

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"kplane.dev/libs/serviceresolver"
	"kplane.dev/libs/storageservice"
)

// Options are the flags of the crd service: those of every storage
// service, and where conversion webhooks' services live.
type Options struct {
	storageservice.Options
	// ServiceMap resolves conversion webhooks' services statically; a
	// service it does not list resolves through cluster DNS.
	ServiceMap []string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Options: storageservice.NewOptions("crd", "127.0.0.1:6470")}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs, "of the authz reviews (an apply that creates needs create); empty answers them 503")
	fs.StringSliceVar(&o.ServiceMap, "service-map", o.ServiceMap, "where conversion webhook services live, namespace/name=https://host:port, repeated or comma-separated; a service not listed resolves to https://<name>.<namespace>.svc:<port>")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	errs := o.Options.Validate()
	if _, err := serviceresolver.ParseMap(o.ServiceMap); err != nil {
		errs = append(errs, fmt.Errorf("--service-map: %w", err))
	}
	return errs
}

// Config is what a Server is built from.
type Config struct {
	*storageservice.Config
	// ServiceMap is where conversion webhooks' services live, by
	// namespace/name.
	ServiceMap serviceresolver.Map
}

// Config validates o, loads the certificates and kubeconfig it names, and
// returns the configuration of a Server that logs to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	c, err := o.Options.Config(o.Validate(), logOut)
	if err != nil {
		return nil, err
	}
	services, err := serviceresolver.ParseMap(o.ServiceMap)
	if err != nil {
		return nil, fmt.Errorf("parse --service-map: %w", err)
	}
	return &Config{Config: c, ServiceMap: services}, nil
}
