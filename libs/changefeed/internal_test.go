package changefeed

import (
	"testing"
)

func TestParseKey(t *testing.T) {
	const registry = "/kplane/registry/"
	tests := []struct {
		key  string
		want keyParts
		ok   bool
	}{
		{"/kplane/registry/core/configmaps/ns/a", keyParts{resource: "configmaps", namespace: "ns", name: "a"}, true},
		{"/kplane/registry/core/namespaces/ns", keyParts{resource: "namespaces", name: "ns"}, true},
		{"/kplane/registry/rbac.authorization.k8s.io/roles/ns/r", keyParts{group: "rbac.authorization.k8s.io", resource: "roles", namespace: "ns", name: "r"}, true},
		{"/kplane/registry/core/configmaps", keyParts{}, false},
		{"/kplane/registry/core/configmaps/ns/a/b", keyParts{}, false},
		{"/kplane/registry/core/configmaps/ns/", keyParts{}, false},
		{"/other/registry/core/configmaps/ns/a", keyParts{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, ok := parseKey(registry, tt.key)
			if ok != tt.ok || got != tt.want {
				t.Errorf("parseKey(%q) = %+v, %v; want %+v, %v", tt.key, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestSubjectMatches(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"kplane.changes.>", "kplane.changes.resync", true},
		{"kplane.changes.*", "kplane.changes.resync", true},
		{"kplane.changes.resync", "kplane.changes.resync", true},
		{"kplane.changes.core.>", "kplane.changes.resync", false},
		{"kplane.changes.*.v1.configmaps", "kplane.changes.resync", false},
		{"kplane.changes.resync.>", "kplane.changes.resync", false},
		{"kplane.>", "kplane.changes.core.v1.configmaps", true},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			if got := subjectMatches(tt.filter, tt.subject); got != tt.want {
				t.Errorf("subjectMatches(%q, %q) = %v, want %v", tt.filter, tt.subject, got, tt.want)
			}
		})
	}
}
