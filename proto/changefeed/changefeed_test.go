package changefeed_test

import (
	"testing"

	"kplane.dev/proto/changefeed"
)

func TestSubject(t *testing.T) {
	tests := []struct {
		group, version, resource string
		want                     string
	}{
		{"", "v1", "configmaps", "kplane.changes.core.v1.configmaps"},
		{"rbac.authorization.k8s.io", "v1", "roles", "kplane.changes.rbac_authorization_k8s_io.v1.roles"},
		{"coordination.k8s.io", "v1", "leases", "kplane.changes.coordination_k8s_io.v1.leases"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := changefeed.Subject(tt.group, tt.version, tt.resource); got != tt.want {
				t.Errorf("Subject(%q, %q, %q) = %q, want %q", tt.group, tt.version, tt.resource, got, tt.want)
			}
		})
	}
}
