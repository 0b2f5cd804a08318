package launcher

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAuditPolicyKept writes the default policy once and keeps the
// operator's edits across runs.
func TestAuditPolicyKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, AuditPolicyFile)
	if err := ensureAuditPolicy(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != DefaultAuditPolicy {
		t.Fatalf("policy %q, %v; want the default", got, err)
	}
	const edited = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata}]\n"
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ensureAuditPolicy(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != edited {
		t.Fatalf("policy %q, %v; want the edited one kept", got, err)
	}
}

// TestComposeAuditPolicy keeps the compose file's and the chart's default
// policy make up's.
func TestComposeAuditPolicy(t *testing.T) {
	for _, path := range []string{"deploy/compose/audit/policy.yaml", "charts/kplane/files/audit-policy.yaml"} {
		got, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != DefaultAuditPolicy {
			t.Errorf("%s differs from DefaultAuditPolicy:\n%s", path, got)
		}
	}
}
