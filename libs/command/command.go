package command

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// Options are a service's flags and what they configure.
type Options[C any] interface {
	AddFlags(fs *pflag.FlagSet)
	// Config validates the options and builds the configuration; logs go
	// to out.
	Config(out io.Writer) (C, error)
}

// Server is what a configuration builds.
type Server interface {
	Run(ctx context.Context) error
}

// Run parses args (without the program name) into opts, builds a server
// from its Config with build, and runs it until ctx ends or a SIGINT or
// SIGTERM arrives. -h and --help print the flags and return nil.
func Run[C any, S Server](ctx context.Context, name string, args []string, out io.Writer, opts Options[C], build func(C) (S, error)) error {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(out)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	cfg, err := opts.Config(out)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := build(cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
