package openapi_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/discovery"
	"kplane.dev/libs/apiserver/openapi"
	"kplane.dev/libs/apiserver/resource"
)

// TestKubectl drives the stock kubectl against a server publishing only
// discovery and OpenAPI: what `kubectl api-resources` and `kubectl explain`
// need from a server is exactly these documents.
func TestKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	resources := []*resource.Resource{configMaps(t), namespaces(t), roles(t), gadgets(), widgets()}
	resources[0].ShortNames = []string{"cm"}
	disc, err := discovery.NewSet(resources)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := openapi.NewSet(resources)
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.HTTPErrorHandler = apistatus.HTTPErrorHandler
	disc.Register(e)
	docs.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	config := `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: ` + srv.URL + `
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
users:
- name: test
  user:
    token: test
`
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"api-resources", []string{"api-resources", "--no-headers"}, []string{
			"configmaps   cm   v1   true   ConfigMap",
			"namespaces        v1   false   Namespace",
			"gadgets           example.com/v1   false   Gadget",
			"roles             rbac.authorization.k8s.io/v1   true   Role",
		}},
		{"explain kind", []string{"explain", "configmaps"}, []string{"KIND:       ConfigMap", "VERSION:    v1", "ConfigMap holds configuration data", "immutable\t<boolean>"}},
		{"explain field", []string{"explain", "roles.rules.verbs"}, []string{"KIND:       Role", "FIELD: verbs <[]string>", "verbs is a list of Verbs"}},
		{"explain recursive", []string{"explain", "gadgets.spec", "--recursive"}, []string{"GROUP:      example.com", "Spec is what the gadget should be.", "size\t<integer>"}},
		{"explain schemaless", []string{"explain", "widgets"}, []string{"KIND:       Widget", "metadata\t<ObjectMeta>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache-"+tt.name)}, tt.args...)...)
			cmd.Env = append(os.Environ(), "HOME="+dir)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(tt.args, " "), err, stdout.String(), stderr.String())
			}
			out := squeeze(stdout.String())
			for _, w := range tt.want {
				if !strings.Contains(out, squeeze(w)) {
					t.Fatalf("kubectl %s output lacks %q:\n%s\n%s", strings.Join(tt.args, " "), w, stdout.String(), stderr.String())
				}
			}
		})
	}
}

// squeeze collapses runs of blanks, so column widths do not matter.
func squeeze(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' }), " ")
}
