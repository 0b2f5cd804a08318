// Command kplane-up runs kplane on this machine: `kplane-up` starts every
// service with an embedded etcd and NATS until Ctrl-C, `kplane-up down`
// stops one running on the same data directory, and `kplane-up nats-auth`
// only writes the services' NATS keys and the NATS server's configuration,
// for a NATS server run otherwise. `kplane-up init` issues what an
// installation of containers needs, one bundle per service (see
// launcher.Init): the first step of docker-compose.yml and of the chart.
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
	if len(os.Args) > 1 && os.Args[1] == "init" {
		return initialize(os.Args[2:])
	}
	opts := launcher.NewOptions(launcher.Services(), os.LookupEnv)
	fs := pflag.NewFlagSet("kplane-up", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kplane-up [flags] [down | nats-auth]\n       kplane-up init [flags]")
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

// initialize is `kplane-up init`.
func initialize(args []string) error {
	o := launcher.InitOptions{
		DataDir:     "/var/lib/kplane",
		Server:      "https://gateway:6443",
		AdminServer: "https://127.0.0.1:6443",
		Hostnames:   []string{launcher.HostnamePlaceholder},
	}
	var export, adminKubeconfig, owner, secretsNamespace, secretPrefix string
	fs := pflag.NewFlagSet("kplane-up init", pflag.ContinueOnError)
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory keeping the CA, the keys and the NATS seeds across runs")
	fs.StringVar(&o.Server, "server", o.Server, "the gateway's URL as the services reach it")
	fs.StringVar(&o.AdminServer, "admin-server", o.AdminServer, "the gateway's URL as the admin reaches it")
	fs.StringArrayVar(&o.Hostnames, "hostname", o.Hostnames, "a name every service's serving certificate is valid for, "+launcher.HostnamePlaceholder+" standing for the service's name; repeatable")
	fs.StringArrayVar(&o.GatewayHostnames, "gateway-hostname", nil, "a further name of the gateway's serving certificate; repeatable")
	fs.StringVar(&export, "export", "", "write each bundle to <dir>/<bundle>/")
	fs.StringVar(&owner, "owner", "", "uid:gid to hand exported files to (when run as root)")
	fs.StringVar(&adminKubeconfig, "admin-kubeconfig", "", "write the admin kubeconfig here, owned by the owner of its folder")
	fs.StringVar(&secretsNamespace, "secrets-namespace", "", "store each bundle as Secret <secret-prefix>-<bundle> in this namespace of the Kubernetes cluster this runs in as a pod (the chart's certificate Job); Secrets there are kept")
	fs.StringVar(&secretPrefix, "secret-prefix", "kplane", "prefix of the Secrets' names (--secrets-namespace)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	var own *[2]int
	if owner != "" {
		var uid, gid int
		if _, err := fmt.Sscanf(owner, "%d:%d", &uid, &gid); err != nil {
			return fmt.Errorf("--owner %q: want uid:gid", owner)
		}
		own = &[2]int{uid, gid}
	}
	bundles, err := launcher.Init(launcher.Services(), o)
	if err != nil {
		return err
	}
	if export != "" {
		if err := launcher.Export(export, bundles, own); err != nil {
			return err
		}
	}
	if adminKubeconfig != "" {
		if err := launcher.WriteAdminKubeconfig(adminKubeconfig, bundles[launcher.AdminBundle]); err != nil {
			return err
		}
	}
	if secretsNamespace != "" {
		if err := launcher.StoreInCluster(context.Background(), secretsNamespace, secretPrefix, bundles, os.Stdout); err != nil {
			return err
		}
	}
	fmt.Printf("issued %d bundles\n", len(bundles))
	return nil
}
