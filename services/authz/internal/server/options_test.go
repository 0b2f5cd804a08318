package server

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestOptionsValidate(t *testing.T) {
	base := []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--client-ca-file=ca", "--nats-url=nats://127.0.0.1:4222", "--kubeconfig=kc"}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"valid defaults", base, nil},
		{"nothing given", nil, []string{"--tls-cert-file", "--client-ca-file", "--nats-url is required", "--kubeconfig is required"}},
		{"unknown mode", append(base, "--authorization-mode=RBAC,Node"), []string{`unknown mode "Node"`}},
		{"repeated mode", append(base, "--authorization-mode=RBAC,RBAC"), []string{`"RBAC" given twice`}},
		{"webhook without config", append(base, "--authorization-mode=Webhook"), []string{"--authorization-webhook-config-file is required"}},
		{"webhook config without mode", append(base, "--authorization-webhook-config-file=w"), []string{"needs mode Webhook"}},
		{"webhook version", append(base, "--authorization-webhook-version=v1beta1"), []string{"want v1"}},
		{"missing policy dir", append(base, "--authorization-policy-dir=/does/not/exist"), []string{"not a readable directory"}},
		{"policy failure mode", append(base, "--authorization-policy-failure-mode=Allow"), []string{"--authorization-policy-failure-mode must be Deny or NoOpinion"}},
		{"log format", append(base, "--log-format=xml"), []string{"--log-format"}},
		{"nats token and creds", append(base, "--nats-token-file=t", "--nats-creds=c"), []string{"NATS credentials come from one of"}},
		{"negative shutdown delay", append(base, "--shutdown-delay-duration=-1s"), []string{"--shutdown-delay-duration: must not be negative"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, err := range o.Validate() {
				got = append(got, err.Error())
			}
			if len(c.want) == 0 && len(got) > 0 {
				t.Fatalf("errors %q, want none", got)
			}
			all := strings.Join(got, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("errors %q, want one with %q", got, w)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o := NewOptions()
	// 6460 is the launcher's port of authz, with room for replicas.
	if o.ListenAddress != "127.0.0.1:6460" || o.ShutdownTimeout != 60*time.Second || strings.Join(o.AuthorizationModes, ",") != "Rego,RBAC" || o.PolicyNamespace != "kube-system" {
		t.Errorf("defaults %+v", o)
	}
}
