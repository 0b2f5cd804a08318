package server

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	valid := func() *Options {
		o := NewOptions()
		o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = "c", "k", "ca"
		o.NATS.URL = "nats://127.0.0.1:4222"
		o.Kubeconfig = "kc"
		o.ServiceAccountSigningKeyFile = "sa.key"
		return o
	}
	tests := []struct {
		name   string
		change func(*Options)
		want   string // substring of the error; empty: valid
	}{
		{name: "valid", change: func(*Options) {}},
		{name: "nats required", change: func(o *Options) { o.NATS.URL = "" }, want: "--nats-url is required"},
		{name: "kubeconfig required", change: func(o *Options) { o.Kubeconfig = "" }, want: "--kubeconfig is required"},
		{name: "no kubeconfig without lookups", change: func(o *Options) {
			o.Kubeconfig, o.ServiceAccountLookup, o.EnableBootstrapTokenAuth = "", false, false
		}},
		{name: "client CA required", change: func(o *Options) { o.ClientCAFile = "" }, want: "--client-ca-file is required"},
		{name: "signing key required", change: func(o *Options) { o.ServiceAccountSigningKeyFile = "" }, want: "--service-account-signing-key-file is required"},
		{name: "max expiration under an hour", change: func(o *Options) { o.ServiceAccountMaxExpiration = time.Minute },
			want: "the service-account-max-token-expiration must be between 1 hour and 2^32 seconds"},
		{name: "oidc over http", change: func(o *Options) { o.OIDC.IssuerURL, o.OIDC.ClientID = "http://issuer", "c" }, want: "--oidc-issuer-url must be an https URL"},
		{name: "oidc without client id", change: func(o *Options) { o.OIDC.IssuerURL = "https://issuer" }, want: "--oidc-client-id is required"},
		{name: "required claim without value", change: func(o *Options) { o.OIDC.RequiredClaims = []string{"tenant"} }, want: "want key=value"},
		{name: "log format", change: func(o *Options) { o.LogFormat = "xml" }, want: "--log-format"},
		{name: "listen address", change: func(o *Options) { o.ListenAddress = "6450" }, want: "--listen-address"},
		{name: "shutdown timeout", change: func(o *Options) { o.ShutdownTimeout = 0 }, want: "--shutdown-timeout: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.change(o)
			errs := o.Validate()
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			got := strings.Join(msgs, "; ")
			if tt.want == "" && len(errs) != 0 {
				t.Fatalf("got %s, want valid", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o := NewOptions()
	// 6450 is the launcher's port of authn, with room for replicas.
	if o.ListenAddress != "127.0.0.1:6450" || o.ShutdownTimeout != 30*time.Second || o.ShutdownDelay != 0 || o.LogFormat != "text" {
		t.Errorf("defaults %+v", o.Options)
	}
}
