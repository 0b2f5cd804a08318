package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func validOptions() *Options {
	o := NewOptions()
	o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = "tls.crt", "tls.key", "ca.crt"
	return o
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Options)
		want   []string
	}{
		{name: "valid", modify: func(*Options) {}},
		{name: "everything wrong at once", modify: func(o *Options) {
			o.ListenAddress, o.TLSCertFile, o.ClientCAFile, o.ShutdownTimeout, o.LogFormat = "nowhere", "", "", 0, "xml"
			o.RequestHeaderAllowedNames, o.EtcdServers, o.EtcdCertFile, o.EtcdPrefix = []string{" "}, []string{"127.0.0.1:2379"}, "c", "kplane/"
			o.NATS.TokenFile, o.NATS.Creds, o.ReviewTimeout, o.CompactionInterval = "t", "c", 0, -time.Second
		}, want: []string{
			"--listen-address", "--tls-cert-file and --tls-private-key-file are required", "--client-ca-file is required", "--shutdown-timeout", "--log-format",
			"--requestheader-allowed-names: empty name", `--etcd-servers: "127.0.0.1:2379"`, "--etcd-certfile and --etcd-keyfile go together",
			"--etcd-prefix", "NATS credentials come from one of", "need --nats-url", "--review-timeout", "--compaction-interval",
		}},
		{name: "no allowed front proxy names", modify: func(o *Options) { o.RequestHeaderAllowedNames = nil }, want: []string{"--requestheader-allowed-names: at least one name is required"}},
		{name: "no etcd", modify: func(o *Options) { o.EtcdServers = nil }, want: []string{"--etcd-servers is required"}},
		{name: "prefix ending in a slash", modify: func(o *Options) { o.EtcdPrefix = "/kplane/" }, want: []string{"--etcd-prefix"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			tt.modify(o)
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
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse([]string{
		"--etcd-servers=https://e1:2379,https://e2:2379",
		"--requestheader-allowed-names=gw-a,gw-b",
		"--compaction-interval=0",
		"--log-format=json",
		"--nats-nkey-file=/k/core.nk",
		"--change-feed-secret-data",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.NATS.NKeyFile != "/k/core.nk" || !o.ChangeFeedSecretData {
		t.Errorf("NATS options = %+v, secret data %v", o.NATS, o.ChangeFeedSecretData)
	}
	if d := NewOptions(); d.ChangeFeedSecretData {
		t.Error("the change feed publishes Secrets' data by default")
	}
	if len(o.EtcdServers) != 2 || o.EtcdServers[1] != "https://e2:2379" || len(o.RequestHeaderAllowedNames) != 2 || o.RequestHeaderAllowedNames[1] != "gw-b" || o.CompactionInterval != 0 || o.LogFormat != "json" {
		t.Errorf("options = %+v", o)
	}
	if o.ListenAddress != "127.0.0.1:6444" || o.EtcdPrefix != "/kplane" || o.ShutdownTimeout != 60*time.Second {
		t.Errorf("defaults lost: %+v", o)
	}
	if d := NewOptions().RequestHeaderAllowedNames; len(d) != 1 || d[0] != "front-proxy-client" {
		t.Errorf("default allowed names = %v, want only the gateway's", d)
	}
}

func TestConfigLoadsFiles(t *testing.T) {
	o := validOptions()
	o.TLSCertFile = t.TempDir() + "/missing.crt"
	if _, err := o.Config(nil); err == nil || !strings.Contains(err.Error(), "load serving certificate") {
		t.Errorf("err = %v, want the serving certificate not loaded", err)
	}
}
