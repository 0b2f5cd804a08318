package options

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "off"},
		{name: "log", args: []string{"--audit-policy-file=p.yaml", "--audit-log-path=-"}},
		{name: "backend without policy", args: []string{"--audit-stream"}, want: "--audit-policy-file is required"},
		{name: "policy without backend", args: []string{"--audit-policy-file=p.yaml"}, want: "needs a backend"},
		{name: "legacy format", args: []string{"--audit-policy-file=p.yaml", "--audit-log-path=-", "--audit-log-format=legacy"}, want: "only json"},
		{name: "buffer", args: []string{"--audit-policy-file=p.yaml", "--audit-log-path=-", "--audit-webhook-batch-buffer-size=0"}, want: "--audit-webhook-batch-buffer-size: must be positive"},
		{name: "rotation", args: []string{"--audit-policy-file=p.yaml", "--audit-log-path=a.log", "--audit-log-maxbackup=-1"}, want: "--audit-log-maxbackup: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := errors.Join(o.Validate()...)
			if tc.want == "" && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
