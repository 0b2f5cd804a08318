package serving_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/libs/serving"
)

var (
	required = serving.Service{Address: "127.0.0.1:6444", ClientCAHelp: "CA of callers", ClientCARequired: "callers are known by it"}
	optional = serving.Service{Address: "127.0.0.1:6443", ClientCAHelp: "CA of users", OwnShutdownDelay: true}
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		service serving.Service
		modify  func(*serving.Options)
		want    []string
	}{
		{name: "valid", service: required, modify: func(*serving.Options) {}},
		{name: "optional client CA left out", service: optional, modify: func(o *serving.Options) { o.ClientCAFile = "" }},
		{name: "required client CA left out", service: required, modify: func(o *serving.Options) { o.ClientCAFile = "" },
			want: []string{"--client-ca-file is required: callers are known by it"}},
		{name: "port 0", service: required, modify: func(o *serving.Options) { o.ListenAddress = "127.0.0.1:0" }},
		{name: "everything wrong at once", service: required, modify: func(o *serving.Options) {
			o.ListenAddress, o.TLSCertFile, o.ClientCAFile = "nowhere", "", ""
			o.ShutdownDelay, o.ShutdownTimeout, o.LogFormat, o.LogLevel = -time.Second, 0, "xml", "verbose"
		}, want: []string{
			"--listen-address: address nowhere: missing port in address",
			"--tls-cert-file and --tls-private-key-file are required",
			"--client-ca-file is required",
			"--shutdown-delay-duration: must not be negative, got -1s",
			"--shutdown-timeout: must be positive, got 0s",
			`--log-format: want json or text, got "xml"`,
			`--log-level: want debug, info, warn or error, got "verbose"`,
		}},
		{name: "key without certificate", service: optional, modify: func(o *serving.Options) { o.TLSPrivateKeyFile = "" },
			want: []string{"--tls-cert-file and --tls-private-key-file are required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := serving.NewOptions(tt.service)
			o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = "tls.crt", "tls.key", "ca.crt"
			tt.modify(&o)
			errs := o.Validate()
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tt.want), errors.Join(errs...))
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to mention %q", i, errs[i], w)
				}
			}
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name      string
		service   serving.Service
		wantDelay bool
	}{
		{name: "shutdown delay registered", service: required, wantDelay: true},
		{name: "shutdown delay left to the service", service: optional},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := serving.NewOptions(tt.service)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if got := fs.Lookup("listen-address").DefValue; got != tt.service.Address {
				t.Errorf("--listen-address defaults to %q, want %q", got, tt.service.Address)
			}
			if got := fs.Lookup("client-ca-file").Usage; got != tt.service.ClientCAHelp {
				t.Errorf("--client-ca-file help %q, want %q", got, tt.service.ClientCAHelp)
			}
			if got := fs.Lookup("shutdown-delay-duration") != nil; got != tt.wantDelay {
				t.Errorf("--shutdown-delay-duration registered: %v, want %v", got, tt.wantDelay)
			}
			args := []string{"--listen-address=:1", "--tls-cert-file=c", "--tls-private-key-file=k", "--client-ca-file=ca", "--shutdown-timeout=5s", "--log-format=json", "--log-level=debug"}
			if tt.wantDelay {
				args = append(args, "--shutdown-delay-duration=2s")
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			want := serving.NewOptions(tt.service)
			want.ListenAddress, want.TLSCertFile, want.TLSPrivateKeyFile, want.ClientCAFile = ":1", "c", "k", "ca"
			want.ShutdownTimeout, want.LogFormat, want.LogLevel = 5*time.Second, "json", "debug"
			if tt.wantDelay {
				want.ShutdownDelay = 2 * time.Second
			}
			if o != want {
				t.Errorf("parsed %+v, want %+v", o, want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o := serving.NewOptions(required)
	if o.ListenAddress != "127.0.0.1:6444" || o.ShutdownTimeout != serving.DefaultShutdownTimeout || o.ShutdownDelay != 0 || o.LogFormat != "text" || o.LogLevel != "info" ||
		!o.Profiling || o.ContentionProfiling {
		t.Errorf("defaults %+v", o)
	}
}

func TestConfigLoadsFiles(t *testing.T) {
	f := newFiles(t)
	tests := []struct {
		name    string
		modify  func(*serving.Options)
		wantErr string
		wantCA  bool
	}{
		{name: "everything", modify: func(*serving.Options) {}, wantCA: true},
		{name: "no client CA", modify: func(o *serving.Options) { o.ClientCAFile = "" }},
		{name: "missing certificate", modify: func(o *serving.Options) { o.TLSCertFile = t.TempDir() + "/missing.crt" }, wantErr: "load serving certificate"},
		{name: "missing client CA", modify: func(o *serving.Options) { o.ClientCAFile = t.TempDir() + "/missing.crt" }, wantErr: "load --client-ca-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := f.options(optional)
			tt.modify(&o)
			c, err := o.Config(nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c.ClientCA != nil) != tt.wantCA || len(c.Certificate.Certificate) == 0 || c.Log == nil {
				t.Errorf("config %+v", c)
			}
		})
	}
}

// TestValidatedRefusesBeforeLoading checks that a service's validation
// errors stop Config before any file is read.
func TestValidatedRefusesBeforeLoading(t *testing.T) {
	o := serving.NewOptions(required)
	o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = "/nonexistent/c", "/nonexistent/k", "/nonexistent/ca"
	_, err := o.Validated([]error{errors.New("--nats-url is required")}, nil)
	if err == nil || err.Error() != "invalid options: --nats-url is required" {
		t.Fatalf("Validated with an error = %v, want the service's error", err)
	}
	if _, err := o.Validated(nil, nil); err == nil || !strings.Contains(err.Error(), "load serving certificate") {
		t.Fatalf("Validated without errors = %v, want the files loaded (and failing)", err)
	}
}
