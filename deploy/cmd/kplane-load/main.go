// Command kplane-load measures a Kubernetes API server, or two side by
// side in alternating rounds, with the workloads of package load, and
// prints throughput, p50/p99 latency and ratios.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"kplane.dev/deploy/load"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kplane-load:", err)
		os.Exit(1)
	}
}

func run() error {
	opts := load.NewOptions()
	fs := pflag.NewFlagSet("kplane-load", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kplane-load --kubeconfig A [--compare-kubeconfig B] [flags]")
		fs.PrintDefaults()
	}
	opts.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if errs := opts.Validate(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	targets, err := opts.Targets()
	if err != nil {
		return err
	}
	// client-go logs through klog every request that the end of a round
	// cuts off, hundreds a run; the report counts real failures.
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := load.Run(ctx, opts, targets, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	if opts.Output == "json" {
		err = report.WriteJSON(os.Stdout)
	} else {
		err = report.WriteTable(os.Stdout)
	}
	if err != nil {
		return err
	}
	if n := report.Errors(); n > 0 {
		return fmt.Errorf("%d operations failed", n)
	}
	return nil
}
