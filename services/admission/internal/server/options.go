package server

import (
	goflag "flag"
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/serving"
)

// service is how admission serves over HTTPS: health and metrics to
// anyone; the reviews travel over NATS.
var service = serving.Service{
	Address:      "127.0.0.1:6480",
	ClientCAHelp: "PEM CA bundle of the cluster (unused by the health and metrics endpoints)",
}

// Options are the flags of the admission service.
type Options struct {
	serving.Options
	NATS natsrpc.ConnOptions
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Options: serving.NewOptions(service)}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs)
	nats := goflag.NewFlagSet("nats", goflag.ContinueOnError)
	o.NATS.AddFlags(nats, "the admission reviews are served on")
	fs.AddGoFlagSet(nats)
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	return append(o.Options.Validate(), o.NATS.Validate(true)...)
}

// Config is what a Server is built from.
type Config struct {
	serving *serving.Config
	nats    natsrpc.ConnOptions
	log     *slog.Logger
}

// Config validates o and returns the configuration of a Server that logs
// to logOut.
func (o *Options) Config(logOut io.Writer) (*Config, error) {
	sc, err := o.Options.Validated(o.Validate(), logOut)
	if err != nil {
		return nil, err
	}
	return &Config{serving: sc, nats: o.NATS, log: sc.Log}, nil
}
