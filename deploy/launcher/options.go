package launcher

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/libs/tracing"
)

// Environment variables that point the installation at an external etcd
// or NATS; the flags of the same meaning override them.
const (
	EnvEtcdServers = "KPLANE_ETCD_SERVERS"
	EnvNATSURL     = "KPLANE_NATS_URL"
	EnvNATSToken   = "KPLANE_NATS_TOKEN"
)

// Options are kplane-up's flags.
type Options struct {
	// DataDir holds certificates, etcd and NATS data, logs, pid files
	// and the admin kubeconfig.
	DataDir string
	// BinDir holds the services' binaries.
	BinDir string
	// Ports are the services' ports by name (--<name>-port).
	Ports    map[string]int
	EtcdPort int
	NATSPort int
	// Replicas are the numbers of processes of scalable services by name
	// (--<name>-replicas).
	Replicas map[string]int
	// ExtraArgs are arguments appended to a service's own, by name
	// (--<name>-arg, repeatable): how a user turns on what the defaults
	// leave off, such as OIDC in authn.
	ExtraArgs map[string][]string

	// EtcdServers, when set, replace the embedded etcd.
	EtcdServers []string
	// NATSURL, when set, replaces the embedded NATS. NATSTokenFile, or
	// else NATSToken (from the environment only, never a flag), is its
	// token; the services read it the same way.
	NATSURL       string
	NATSToken     string
	NATSTokenFile string

	// StopGrace is how long a service has to exit after SIGTERM.
	StopGrace time.Duration
	// ReadyTimeout bounds the wait for each service's first readiness.
	ReadyTimeout time.Duration
	Restart      RestartPolicy

	Services []Service
	// Only, when set, names the services to run, a subset of Services.
	Only []string

	// Tracing is handed to every service: one flag sends the whole
	// system's traces to a collector.
	Tracing tracing.Options

	// Procs is the GOMAXPROCS of every service and of kplane-up, which
	// runs the embedded etcd and NATS; 0 leaves each its Go runtime's
	// default (or the environment's GOMAXPROCS).
	Procs int
}

// defaultProcs is half the CPUs this process may use (all of the
// machine's, or its container's share), at least one, unless the
// environment sets GOMAXPROCS, which then reaches every service as it is.
//
// Every request keeps several processes busy at once: the gateway, core
// or crd, and etcd and NATS. A Go runtime that may run on every CPU
// wakes a second thread for each goroutine a network read readies, and
// that thread mostly finds the CPU taken by another process. On two
// CPUs, GOMAXPROCS 1 instead of 2 in every process spent 7% to 25% less
// CPU per request on each workload of kplane-load, with half the context
// switches; against 1 in the services and 2 in kplane-up, 1 everywhere
// still spent 17% to 33% less on all but lists (issue 14).
func defaultProcs(lookup func(string) (string, bool), procs int) int {
	if v, ok := lookup("GOMAXPROCS"); ok && v != "" {
		return 0
	}
	return max(1, procs/2)
}

// NewOptions returns the defaults for services, with external etcd and
// NATS read from the environment through lookup (os.LookupEnv).
func NewOptions(services []Service, lookup func(string) (string, bool)) *Options {
	o := &Options{
		DataDir:      ".kplane",
		Ports:        map[string]int{},
		Replicas:     map[string]int{},
		ExtraArgs:    map[string][]string{},
		EtcdPort:     2379,
		NATSPort:     4222,
		StopGrace:    30 * time.Second,
		ReadyTimeout: 2 * time.Minute,
		Restart:      RestartPolicy{Backoff: 500 * time.Millisecond, MaxBackoff: 8 * time.Second, Healthy: 10 * time.Second, MaxFailures: 5},
		Services:     services,
		Tracing:      tracing.NewOptions(),
		Procs:        defaultProcs(lookup, runtime.GOMAXPROCS(0)),
	}
	for _, s := range services {
		o.Ports[s.Name] = s.Port
		if s.Scalable {
			o.Replicas[s.Name] = 1
		}
	}
	if exe, err := os.Executable(); err == nil {
		o.BinDir = filepath.Dir(exe)
	}
	if v, ok := lookup(EnvEtcdServers); ok && v != "" {
		o.EtcdServers = strings.Split(v, ",")
	}
	if v, ok := lookup(EnvNATSURL); ok {
		o.NATSURL = v
	}
	if v, ok := lookup(EnvNATSToken); ok {
		o.NATSToken = v
	}
	return o
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "directory of certificates, etcd and NATS data, logs and the admin kubeconfig; kept across runs")
	fs.StringVar(&o.BinDir, "bin-dir", o.BinDir, "directory of the service binaries (default: kplane-up's own)")
	for _, s := range o.Services {
		fs.Var(intEntry{m: o.Ports, key: s.Name}, s.Name+"-port", "port of "+s.Name+" on 127.0.0.1")
		if s.Scalable {
			fs.Var(intEntry{m: o.Replicas, key: s.Name}, s.Name+"-replicas", "number of "+s.Name+" processes, on consecutive ports from --"+s.Name+"-port")
		}
		fs.Var(argsEntry{m: o.ExtraArgs, key: s.Name}, s.Name+"-arg", "an argument appended to "+s.Name+"'s own (repeatable), e.g. --"+s.Name+"-arg=--log-format=json")
	}
	fs.IntVar(&o.EtcdPort, "etcd-port", o.EtcdPort, "client port of the embedded etcd")
	fs.IntVar(&o.NATSPort, "nats-port", o.NATSPort, "client port of the embedded NATS server")
	fs.StringSliceVar(&o.EtcdServers, "etcd-servers", o.EtcdServers, "client URLs of an external etcd instead of the embedded one (env "+EnvEtcdServers+")")
	fs.StringVar(&o.NATSURL, "nats-url", o.NATSURL, "URL of an external NATS instead of the embedded one (env "+EnvNATSURL+")")
	fs.StringVar(&o.NATSTokenFile, "nats-token-file", o.NATSTokenFile, "file holding the token of the external NATS (or env "+EnvNATSToken+"; a token is never a flag)")
	fs.StringSliceVar(&o.Only, "services", o.Only, "names of the services to run (default: all); the admin kubeconfig is written only when "+PublicService+" runs")
	fs.DurationVar(&o.StopGrace, "stop-grace", o.StopGrace, "how long a service may take to exit after SIGTERM before it is killed")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", o.ReadyTimeout, "how long each service may take to become ready")
	fs.IntVar(&o.Procs, "procs", o.Procs, "GOMAXPROCS of every service and of kplane-up (the embedded etcd and NATS): how many CPUs each Go runtime runs goroutines on at once; 0 leaves each runtime its default. Default: half the CPUs kplane-up may use, at least one, unless GOMAXPROCS is set in the environment")
	// The services' own flags, handed to each; the OTEL_* variables reach
	// them as the rest of the environment does.
	o.Tracing.AddFlags(fs)
}

// argsEntry is the flag of one entry of a map of argument lists.
type argsEntry struct {
	m   map[string][]string
	key string
}

func (v argsEntry) String() string { return strings.Join(v.m[v.key], " ") }
func (v argsEntry) Type() string   { return "stringArray" }

func (v argsEntry) Set(s string) error {
	v.m[v.key] = append(v.m[v.key], s)
	return nil
}

// intEntry is the flag of one entry of a map of ints (ports, replicas).
type intEntry struct {
	m   map[string]int
	key string
}

func (v intEntry) String() string { return strconv.Itoa(v.m[v.key]) }
func (v intEntry) Type() string   { return "int" }

func (v intEntry) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	v.m[v.key] = n
	return nil
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.DataDir == "" {
		add("--data-dir is required")
	}
	if o.BinDir == "" {
		add("--bin-dir is required")
	}
	seen := map[int]string{}
	check := func(flag string, port int) {
		if port <= 0 || port > 65535 {
			add("--%s: %d is not a port", flag, port)
		}
		if other, ok := seen[port]; ok {
			add("--%s and --%s are both %d", other, flag, port)
		}
		seen[port] = flag
	}
	for _, s := range o.Services {
		check(s.Name+"-port", o.Ports[s.Name])
		n, ok := o.Replicas[s.Name]
		switch {
		case !ok:
		case !s.Scalable:
			add("--%s-replicas: %s runs as one process", s.Name, s.Name)
		case n < 1:
			add("--%s-replicas: must be at least 1, got %d", s.Name, n)
		}
		for i := 1; i < n; i++ {
			check(fmt.Sprintf("%s-port (replica %d)", s.Name, i), o.Ports[s.Name]+i)
		}
	}
	if len(o.EtcdServers) == 0 {
		check("etcd-port", o.EtcdPort)
	}
	for _, s := range o.EtcdServers {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("--etcd-servers: %q is not an http or https URL", s)
		}
	}
	if o.NATSURL == "" {
		check("nats-port", o.NATSPort)
		if o.NATSToken != "" || o.NATSTokenFile != "" {
			add("--nats-token-file and %s need --nats-url: the embedded NATS gives each service its own key", EnvNATSToken)
		}
	}
	if o.NATSToken != "" && o.NATSTokenFile != "" {
		add("--nats-token-file and %s are exclusive", EnvNATSToken)
	}
	for _, n := range o.Only {
		if !slices.ContainsFunc(o.Services, func(s Service) bool { return s.Name == n }) {
			add("--services: no service %q", n)
		}
	}
	if o.StopGrace <= 0 {
		add("--stop-grace: must be positive, got %v", o.StopGrace)
	}
	if o.ReadyTimeout <= 0 {
		add("--ready-timeout: must be positive, got %v", o.ReadyTimeout)
	}
	if o.Procs < 0 {
		add("--procs: must not be negative, got %d", o.Procs)
	}
	errs = append(errs, o.Tracing.Validate()...)
	return errs
}

// Config is a validated Options with absolute paths.
type Config struct {
	dataDir, binDir string
	ports           map[string]int
	replicas        map[string]int
	extraArgs       map[string][]string
	etcdPort        int
	natsPort        int
	etcdServers     []string
	natsURL         string
	natsTokenFile   string
	stopGrace       time.Duration
	readyTimeout    time.Duration
	probeInterval   time.Duration
	restart         RestartPolicy
	procs           int
	services        []Service
	log             *slog.Logger
	// out receives what the user reads: how to use the installation.
	out io.Writer
}

// Config validates o and returns the configuration of a run that logs to
// log and tells the user how to use it on out.
func (o *Options) Config(log *slog.Logger, out io.Writer) (*Config, error) {
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid options: %w", errors.Join(errs...))
	}
	data, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolve --data-dir: %w", err)
	}
	bin, err := filepath.Abs(o.BinDir)
	if err != nil {
		return nil, fmt.Errorf("resolve --bin-dir: %w", err)
	}
	tokenFile := o.NATSTokenFile
	if tokenFile != "" {
		if tokenFile, err = filepath.Abs(tokenFile); err != nil {
			return nil, fmt.Errorf("resolve --nats-token-file: %w", err)
		}
	}
	var services []Service
	for _, s := range o.Services {
		if len(o.Only) == 0 || slices.Contains(o.Only, s.Name) {
			services = append(services, s)
		}
	}
	for _, s := range services {
		if _, err := os.Stat(filepath.Join(bin, s.Binary)); err != nil {
			return nil, fmt.Errorf("binary of %s: %w (make up builds it into bin/)", s.Name, err)
		}
	}
	ports := make(map[string]int, len(o.Ports))
	for k, v := range o.Ports {
		ports[k] = v
	}
	replicas := make(map[string]int, len(o.Replicas))
	for k, v := range o.Replicas {
		replicas[k] = v
	}
	extra := make(map[string][]string, len(o.Services))
	for _, s := range o.Services {
		extra[s.Name] = append(o.Tracing.Args(), o.ExtraArgs[s.Name]...)
	}
	return &Config{
		extraArgs:     extra,
		dataDir:       data,
		binDir:        bin,
		ports:         ports,
		replicas:      replicas,
		etcdPort:      o.EtcdPort,
		natsPort:      o.NATSPort,
		etcdServers:   append([]string(nil), o.EtcdServers...),
		natsURL:       o.NATSURL,
		natsTokenFile: tokenFile,
		stopGrace:     o.StopGrace,
		readyTimeout:  o.ReadyTimeout,
		probeInterval: 100 * time.Millisecond,
		restart:       o.Restart,
		procs:         o.Procs,
		services:      services,
		log:           log,
		out:           out,
	}, nil
}
