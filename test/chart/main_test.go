package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
)

// helmEnv names the helm binary; make test sets it to the one it
// installed, at the version the Makefile pins.
const helmEnv = "KPLANE_HELM"

// services are kplane's services: each has its own Deployment, Service,
// PodDisruptionBudget, ServiceAccount and NetworkPolicy.
var services = []string{"gateway", "authn", "authz", "core", "crd", "admission"}

// built holds the services' binaries; package state because building
// once per test binary is the point.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if contract.dir != "" {
		_ = os.RemoveAll(contract.dir)
	}
	os.Exit(code)
}

// helm runs the pinned helm with args and returns its standard output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv(helmEnv)
	if bin == "" {
		t.Fatalf("$%s is not set: run make test, which installs the pinned helm and sets it", helmEnv)
	}
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// root is the workspace's directory.
func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		t.Fatalf("go env GOWORK: %v", err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		t.Fatalf("the chart tests run inside the kplane workspace; GOWORK is %q", work)
	}
	return filepath.Dir(work)
}

// chartDir is charts/kplane.
func chartDir(t *testing.T) string { return filepath.Join(root(t), "charts", "kplane") }

// binaries returns the directory of the services' binaries and
// kplane-up, building them on first use. They stay in _output of the
// workspace, where go build finds them up to date next time instead of
// linking seven large binaries anew.
func binaries(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir = filepath.Join(root(t), "_output", "test", "chart-bin")
		args := []string{"build", "-o", built.dir + string(filepath.Separator)}
		for _, s := range services {
			args = append(args, "kplane.dev/services/"+s+"/cmd/kplane-"+s)
		}
		args = append(args, "kplane.dev/deploy/cmd/kplane-up")
		cmd := exec.Command("go", args...)
		cmd.Dir = root(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// strict decodes manifests into their k8s.io/api types and refuses
// unknown or duplicated fields, and kinds it does not know.
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// release and namespace are what every render installs as.
const (
	release   = "kp"
	namespace = "kplane-system"
)

// render runs helm template with values (a YAML document) and decodes
// every manifest.
func render(t *testing.T, values string) []runtime.Object {
	t.Helper()
	out, err := renderRaw(t, values)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// renderRaw runs helm template with values and returns its output.
func renderRaw(t *testing.T, values string, extra ...string) (string, error) {
	t.Helper()
	args := append([]string{"template", release, chartDir(t), "--namespace", namespace, "--values", valuesFile(t, values)}, extra...)
	return helm(t, args...)
}

// valuesFile writes values to a file for helm's --values, which splits
// its argument at commas: the file's path has none, unlike t.TempDir's
// for a test whose name has some.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	f, err := os.CreateTemp("", "kplane-values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.WriteString(values); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// decode splits helm's output into manifests and decodes each strictly.
func decode(t *testing.T, out string) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for _, doc := range strings.Split(out, "\n---") {
		if !hasContent(doc) {
			continue
		}
		obj, gvk, err := strict.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decode manifest: %v\n%s", err, doc)
		}
		if gvk.Kind == "" {
			t.Fatalf("manifest without a kind:\n%s", doc)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		t.Fatalf("helm template rendered nothing:\n%s", out)
	}
	return objs
}

// hasContent reports whether a YAML document holds more than comments.
func hasContent(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return true
		}
	}
	return false
}

// TestDecodeIsStrict: the decoder the render tests rely on refuses a
// field its type does not have, so that a misspelled field in a template
// fails them.
func TestDecodeIsStrict(t *testing.T) {
	const manifest = "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIp: None}\n"
	if _, _, err := strict.Decode([]byte(manifest), nil, nil); err == nil || !strings.Contains(err.Error(), `unknown field "spec.clusterIp"`) {
		t.Fatalf("decode a Service with spec.clusterIp: %v", err)
	}
}
