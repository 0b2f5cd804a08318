package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

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

// HealthcheckCommand is the first argument that makes a binary probe a
// running replica instead of running one: given the replica's own flags,
// it exits 0 when the replica is ready. Container images without a shell
// or curl use it as their health check.
const HealthcheckCommand = "healthcheck"

// healthcheckTimeout bounds one probe.
const healthcheckTimeout = 5 * time.Second

// Prober is Options that can ask the replica they configure whether it is
// ready.
type Prober interface {
	Probe(ctx context.Context) error
}

// CheckFlagsCommand is the first argument that makes a binary check a
// command line instead of running it: the remaining arguments are parsed
// with the binary's own flags and validated as the server validates them
// before it reads any file they name. Deployments that write command lines
// for the binaries (the Helm chart's tests) run it, so that their flags
// cannot drift from the binaries'.
const CheckFlagsCommand = "check-flags"

// Validator is Options that report every problem with the flags parsed
// into them, without reading the files they name.
type Validator interface {
	Validate() []error
}

// Run parses args (without the program name) into opts, builds a server
// from its Config with build, and runs it until ctx ends or a SIGINT or
// SIGTERM arrives. The server's logs reach out in batches (see
// logWriter), all of them by the time Run returns. -h and --help print the flags and return nil. With
// HealthcheckCommand first, it probes the replica the remaining flags
// configure instead; with CheckFlagsCommand first, it checks them.
func Run[C any, S Server](ctx context.Context, name string, args []string, out io.Writer, opts Options[C], build func(C) (S, error)) error {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(out)
	opts.AddFlags(fs)
	if len(args) > 0 && args[0] == HealthcheckCommand {
		return healthcheck(ctx, name, fs, args[1:], opts)
	}
	if len(args) > 0 && args[0] == CheckFlagsCommand {
		return checkFlags(name, fs, args[1:], opts)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	logOut := newLogWriter(out)
	defer logOut.Close()
	cfg, err := opts.Config(logOut)
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

func healthcheck(ctx context.Context, name string, fs *pflag.FlagSet, args []string, opts any) error {
	p, ok := opts.(Prober)
	if !ok {
		return fmt.Errorf("%s has no %s", name, HealthcheckCommand)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	return p.Probe(ctx)
}

func checkFlags(name string, fs *pflag.FlagSet, args []string, opts any) error {
	v, ok := opts.(Validator)
	if !ok {
		return fmt.Errorf("%s has no %s", name, CheckFlagsCommand)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The server ignores arguments that are not flags; a command line
	// that has some was meant to say something else (a value split from
	// its flag, say).
	if rest := fs.Args(); len(rest) > 0 {
		return fmt.Errorf("arguments that are not flags: %q", rest)
	}
	if errs := v.Validate(); len(errs) > 0 {
		return fmt.Errorf("invalid options: %w", errors.Join(errs...))
	}
	return nil
}
