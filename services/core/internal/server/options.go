package server

import (
	"io"

	"github.com/spf13/pflag"

	"kplane.dev/libs/storageservice"
)

// Options are the flags of the core-resource service: those of every
// storage service and core's own.
type Options struct {
	storageservice.Options

	// ChangeFeedSecretData publishes Secrets' data and stringData on the
	// change feed; without it Secrets are published as metadata only.
	ChangeFeedSecretData bool
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Options: storageservice.NewOptions("core", "127.0.0.1:6444")}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs, "of the change feed and of the authn/authz reviews; empty publishes no change feed and answers reviews 503")
	fs.BoolVar(&o.ChangeFeedSecretData, "change-feed-secret-data", o.ChangeFeedSecretData, "publish the data of Secrets on the change feed (default: their metadata only). Risk: whoever may read the change feed's stream then reads every Secret in the cluster, past ones included until the stream drops them")
}

// Validate reports every problem with o.
func (o *Options) Validate() []error { return o.Options.Validate() }

// Config is what a Server is built from: validated options with the files
// they name loaded.
type Config struct {
	*storageservice.Config
	changeSecretData bool
}

// Config validates o, loads the certificates and kubeconfig it names, and
// returns the configuration of a Server that logs to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	c, err := o.Options.Config(o.Validate(), logOut)
	if err != nil {
		return nil, err
	}
	return &Config{Config: c, changeSecretData: o.ChangeFeedSecretData}, nil
}
