package server

import (
	"io"

	"github.com/spf13/pflag"

	"kplane.dev/libs/storageservice"
)

// Options are the flags of the crd service: those of every storage
// service.
type Options struct {
	storageservice.Options
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Options: storageservice.NewOptions("127.0.0.1:6470")}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs, "of the authz reviews (an apply that creates needs create); empty answers them 503")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error { return o.Options.Validate() }

// Config is what a Server is built from.
type Config struct {
	*storageservice.Config
}

// Config validates o, loads the certificates and kubeconfig it names, and
// returns the configuration of a Server that logs to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	c, err := o.Options.Config(o.Validate(), logOut)
	if err != nil {
		return nil, err
	}
	return &Config{Config: c}, nil
}
