// Command kplane-up runs kplane on this machine: `kplane-up` starts every
// service with an embedded etcd and NATS until Ctrl-C, `kplane-up down`
// stops one running on the same data directory, and `kplane-up nats-auth`
// only writes the services' NATS keys and the NATS server's configuration,
// for a NATS server run otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"kplane.dev/deploy/launcher"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-up:", err)
		os.Exit(1)
	}
}

func run() error {
	opts := launcher.NewOptions(launcher.Services(), os.LookupEnv)
	fs := pflag.NewFlagSet("kplane-up", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kplane-up [flags] [down | nats-auth]")
		fs.PrintDefaults()
	}
	opts.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch fs.Arg(0) {
	case "":
	case "down":
		return launcher.Down(ctx, opts.DataDir, opts.StopGrace)
	case "nats-auth":
		files, err := launcher.NATSAuth(opts.DataDir)
		if err != nil {
			return err
		}
		fmt.Printf("NATS server configuration: %s\nservice keys (--nats-nkey-file): %s\n", files.Config(), files.Seed("<service>"))
		return nil
	default:
		return fmt.Errorf("unknown command %q", fs.Arg(0))
	}
	cfg, err := opts.Config(slog.New(slog.NewTextHandler(os.Stderr, nil)), os.Stdout)
	if err != nil {
		return err
	}
	return launcher.Run(ctx, cfg)
}
