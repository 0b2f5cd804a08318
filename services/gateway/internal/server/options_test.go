package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/services/gateway/internal/server"
)

// TestFlags checks the serving flags the gateway shares with the other
// services: its defaults, an optional --client-ca-file, and the shutdown
// delay its filters register (a second registration would panic).
func TestFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(*server.Options) bool
		want  []string // substrings of Validate's errors
	}{
		{name: "defaults", check: func(o *server.Options) bool {
			return o.ListenAddress == "127.0.0.1:6443" && o.ShutdownTimeout == 60*time.Second && o.LogFormat == "text"
		}, want: []string{"--tls-cert-file and --tls-private-key-file are required"}},
		{name: "no client CA is valid", args: []string{"--tls-cert-file=c", "--tls-private-key-file=k"}},
		{name: "shutdown delay goes to the filters", args: []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--shutdown-delay-duration=5s", "--shutdown-timeout=7s"},
			check: func(o *server.Options) bool {
				return o.Filters.ShutdownDelay == 5*time.Second && o.ShutdownTimeout == 7*time.Second
			}},
		{name: "request-header CA without allowed names", args: []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--requestheader-client-ca-file=ca.crt"},
			want: []string{"--requestheader-allowed-names: at least one name is required with --requestheader-client-ca-file"}},
		{name: "request-header CA with an empty allowed name", args: []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--requestheader-client-ca-file=ca.crt", "--requestheader-allowed-names="},
			want: []string{"--requestheader-allowed-names: at least one name is required"}},
		{name: "request-header CA with allowed names", args: []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--requestheader-client-ca-file=ca.crt", "--requestheader-allowed-names=front-proxy-client"}},
		{name: "bad serving flags", args: []string{"--listen-address=6443", "--tls-cert-file=c", "--shutdown-timeout=0s", "--log-format=xml"},
			want: []string{"--listen-address", "--tls-cert-file and --tls-private-key-file are required", "--shutdown-timeout: must be positive", "--log-format"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := server.NewOptions()
			// The gateway needs these whatever its serving flags.
			o.ProxyClientCertFile, o.ProxyClientKeyFile, o.BackendCAFile = "p.crt", "p.key", "b.crt"
			o.NATS.URL = "nats://127.0.0.1:4222"
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if tt.check != nil && !tt.check(o) {
				t.Errorf("options %+v", o)
			}
			var got []string
			for _, err := range o.Validate() {
				got = append(got, err.Error())
			}
			all := strings.Join(got, "\n")
			if len(tt.want) == 0 && len(got) > 0 {
				t.Fatalf("errors %q, want none", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("errors %q, want one with %q", got, w)
				}
			}
		})
	}
}
