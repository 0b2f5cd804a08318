package launcher

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestOptionsValidate(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	tests := []struct {
		name  string
		flags []string
		want  []string
	}{
		{name: "defaults", flags: nil},
		{name: "ports of services are flags", flags: []string{"--core-port=7444", "--gateway-port=7443"}},
		{name: "two services on one port", flags: []string{"--core-port=7000", "--gateway-port=7000"}, want: []string{"--core-port and --gateway-port are both 7000"}},
		{name: "a service on etcd's port", flags: []string{"--etcd-port=6444"}, want: []string{"are both 6444"}},
		{name: "external etcd frees its port", flags: []string{"--etcd-port=6444", "--etcd-servers=http://127.0.0.1:2379"}},
		{name: "bad etcd url", flags: []string{"--etcd-servers=127.0.0.1:2379"}, want: []string{"is not an http or https URL"}},
		{name: "token file without nats url", flags: []string{"--nats-token-file=x"}, want: []string{"--nats-token-file and KPLANE_NATS_TOKEN need --nats-url"}},
		{name: "no token on the command line", flags: []string{"--nats-url=nats://n:4222", "--nats-token=x"}, want: []string{"unknown flag: --nats-token"}},
		{name: "unknown service", flags: []string{"--services=core,nope"}, want: []string{`--services: no service "nope"`}},
		{name: "core replicas on consecutive ports", flags: []string{"--core-replicas=3", "--core-port=7000", "--gateway-port=7003"}},
		{name: "a core replica on the gateway's port", flags: []string{"--core-replicas=2", "--core-port=7000", "--gateway-port=7001"}, want: []string{"--core-port (replica 1) and --gateway-port are both 7001"}},
		{name: "no core replica", flags: []string{"--core-replicas=0"}, want: []string{"--core-replicas: must be at least 1, got 0"}},
		{name: "port out of range", flags: []string{"--nats-port=70000"}, want: []string{"--nats-port: 70000 is not a port"}},
		{name: "negative procs", flags: []string{"--procs=-1"}, want: []string{"--procs: must not be negative, got -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions(Services(), noEnv)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			var errs []error
			if err := fs.Parse(tt.flags); err != nil {
				errs = []error{err}
			} else {
				errs = o.Validate()
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("Validate = %v, want %d errors like %q", errs, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], w)
				}
			}
		})
	}
}

func TestOptionsFromEnvironment(t *testing.T) {
	env := map[string]string{EnvEtcdServers: "http://a:2379,http://b:2379", EnvNATSURL: "nats://n:4222", EnvNATSToken: "tok"}
	o := NewOptions(Services(), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--nats-url=nats://flag:4222"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.EtcdServers, ","); got != env[EnvEtcdServers] {
		t.Errorf("etcd servers = %q, want %q from the environment", got, env[EnvEtcdServers])
	}
	if o.NATSURL != "nats://flag:4222" {
		t.Errorf("nats url = %q, want the flag's over the environment's", o.NATSURL)
	}
	if o.NATSToken != "tok" {
		t.Errorf("nats token = %q, want tok", o.NATSToken)
	}
}

func TestExtraArgs(t *testing.T) {
	o := NewOptions(Services(), func(string) (string, bool) { return "", false })
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--authn-arg=--oidc-issuer-url=https://issuer", "--authn-arg=--oidc-client-id=kplane", "--core-arg=--log-format=json"}); err != nil {
		t.Fatal(err)
	}
	certs, err := issue(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{extraArgs: o.ExtraArgs, dataDir: "/d", ports: o.Ports, replicas: o.Replicas}
	for _, p := range []struct {
		name string
		want string
	}{{"authn", "--oidc-client-id=kplane"}, {"core", "--log-format=json"}} {
		var svc Service
		for _, s := range Services() {
			if s.Name == p.name {
				svc = s
			}
		}
		sup, err := cfg.supervisor(process{service: svc, name: p.name, port: svc.Port}, Env{PKI: "/p", Data: "/d", Ports: o.Ports}, certs)
		if err != nil {
			t.Fatal(err)
		}
		if got := sup.args[len(sup.args)-1]; got != p.want {
			t.Errorf("%s's last argument = %q, want %q", p.name, got, p.want)
		}
	}
}

// TestTracingReachesEveryService: kplane-up's tracing flags are handed to
// every service, before the service's own extra arguments, which may
// override them.
func TestTracingReachesEveryService(t *testing.T) {
	bin := t.TempDir()
	for _, s := range Services() {
		if err := os.WriteFile(filepath.Join(bin, s.Binary), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o := NewOptions(Services(), func(string) (string, bool) { return "", false })
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--bin-dir=" + bin, "--data-dir=" + t.TempDir(),
		"--tracing-endpoint=http://127.0.0.1:4318", "--tracing-protocol=http/protobuf", "--tracing-sampling-rate-per-million=1000000",
		"--authz-arg=--tracing-sampling-rate-per-million=0"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(slog.New(slog.DiscardHandler), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := issue(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--tracing-endpoint=http://127.0.0.1:4318", "--tracing-protocol=http/protobuf", "--tracing-sampling-rate-per-million=1000000"}
	for _, s := range Services() {
		sup, err := cfg.supervisor(process{service: s, name: s.Name, port: s.Port}, Env{PKI: "/p", Data: "/d", Ports: o.Ports}, certs)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.Index(sup.args, want[0]); i < 0 || !slices.Equal(sup.args[i:i+3], want) {
			t.Errorf("%s's arguments %q lack %q", s.Name, sup.args, want)
		}
		if s.Name == "authz" && sup.args[len(sup.args)-1] != "--tracing-sampling-rate-per-million=0" {
			t.Errorf("authz's own argument does not come last: %q", sup.args)
		}
	}
}

// TestDefaultProcs: each process gets half the CPUs, at least one, unless
// the environment's GOMAXPROCS is there to reach them all.
func TestDefaultProcs(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	withEnv := func(k string) (string, bool) {
		if k == "GOMAXPROCS" {
			return "3", true
		}
		return "", false
	}
	tests := []struct {
		name   string
		lookup func(string) (string, bool)
		cpus   int
		want   int
	}{
		{name: "two CPUs", lookup: noEnv, cpus: 2, want: 1},
		{name: "one CPU", lookup: noEnv, cpus: 1, want: 1},
		{name: "sixteen CPUs", lookup: noEnv, cpus: 16, want: 8},
		{name: "odd CPUs round down", lookup: noEnv, cpus: 5, want: 2},
		{name: "GOMAXPROCS in the environment", lookup: withEnv, cpus: 16, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultProcs(tt.lookup, tt.cpus); got != tt.want {
				t.Errorf("defaultProcs(%d CPUs) = %d, want %d", tt.cpus, got, tt.want)
			}
		})
	}
}

// TestProcsReachEveryService: --procs becomes each service's GOMAXPROCS,
// overriding one inherited from kplane-up's environment; --procs=0 leaves
// the environment as it is.
func TestProcsReachEveryService(t *testing.T) {
	t.Setenv("GOMAXPROCS", "7")
	bin := t.TempDir()
	for _, s := range Services() {
		if err := os.WriteFile(filepath.Join(bin, s.Binary), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	certs, err := issue(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		procs string
		want  string
	}{{procs: "3", want: "3"}, {procs: "0", want: ""}} {
		o := NewOptions(Services(), func(string) (string, bool) { return "", false })
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse([]string{"--bin-dir=" + bin, "--data-dir=" + t.TempDir(), "--procs=" + tt.procs}); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.Config(slog.New(slog.DiscardHandler), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range Services() {
			sup, err := cfg.supervisor(process{service: s, name: s.Name, port: s.Port}, Env{PKI: "/p", Data: "/d", Ports: o.Ports}, certs)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if sup.env != nil {
					t.Errorf("--procs=0: %s's environment is set: %q", s.Name, sup.env)
				}
				continue
			}
			if got := lastValue(sup.env, "GOMAXPROCS"); got != tt.want {
				t.Errorf("--procs=%s: %s's GOMAXPROCS = %q, want %q", tt.procs, s.Name, got, tt.want)
			}
			if got := lastValue(sup.env, "PATH"); got != os.Getenv("PATH") {
				t.Errorf("%s's PATH = %q, want kplane-up's own", s.Name, got)
			}
		}
	}
}

// lastValue is key's value in env as exec.Cmd reads it: the last one.
func lastValue(env []string, key string) string {
	for _, v := range slices.Backward(env) {
		if k, val, ok := strings.Cut(v, "="); ok && k == key {
			return val
		}
	}
	return ""
}
