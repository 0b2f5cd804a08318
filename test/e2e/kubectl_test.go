package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"kplane.dev/test/e2e/harness"
)

// TestKubectl drives one kplane with the machine's stock kubectl and
// compares what kubectl prints with what it prints against
// kube-apiserver. Subtests share the system and each works in a namespace
// of its own.
func TestKubectl(t *testing.T) {
	sys := harness.Start(t)
	t.Run("discovery", func(t *testing.T) { testDiscovery(t, sys) })
	t.Run("create and get", func(t *testing.T) { testCreateGet(t, sys) })
	t.Run("apply and diff", func(t *testing.T) { testApply(t, sys) })
	t.Run("patch label annotate", func(t *testing.T) { testPatch(t, sys) })
	t.Run("replace and delete", func(t *testing.T) { testReplaceDelete(t, sys) })
	t.Run("selectors", func(t *testing.T) { testSelectors(t, sys) })
	t.Run("errors", func(t *testing.T) { testErrors(t, sys) })
	t.Run("watch", func(t *testing.T) { testWatch(t, sys) })
	t.Run("explain", func(t *testing.T) { testExplain(t, sys) })
	t.Run("readyz", func(t *testing.T) { testReadyz(t, sys) })
	t.Run("namespace deletion", func(t *testing.T) { testNamespaceDeletion(t, sys) })
}

// step is one kubectl command and what kube-apiserver makes it print. In
// args, stdout and stderr, {file} stands for the step's manifest file.
type step struct {
	name string
	// manifest, when set, is written to {file} before the command runs.
	manifest string
	args     []string
	stdout   string
	stderr   string
	fails    bool
}

// runSteps runs steps in order in namespace ns (kubectl's default when
// ns is empty), each as a subtest, so that
// later steps see what earlier ones did. A failed step fails its subtest
// and the rest still run: each asserts on its own output.
func runSteps(t *testing.T, sys *harness.System, ns string, steps []step) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.manifest != "" {
				if err := os.WriteFile(file, []byte(s.manifest), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var args []string
			if ns != "" {
				args = append(args, "-n", ns)
			}
			for _, a := range s.args {
				args = append(args, strings.ReplaceAll(a, "{file}", file))
			}
			out, errOut, err := sys.Kubectl(t, args...)
			if s.fails != (err != nil) {
				t.Errorf("kubectl %s: error %v, want failure %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, s.fails, out, errOut)
			}
			if want := strings.ReplaceAll(s.stdout, "{file}", file); normalize(out) != want {
				t.Errorf("kubectl %s: stdout\n%s\nwant\n%s", strings.Join(args, " "), normalize(out), want)
			}
			if want := strings.ReplaceAll(s.stderr, "{file}", file); errOut != want {
				t.Errorf("kubectl %s: stderr\n%s\nwant\n%s", strings.Join(args, " "), errOut, want)
			}
		})
	}
}

// volatile are the parts of kubectl's output that differ from run to run,
// with what normalize puts in their place.
var volatile = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`("?creationTimestamp"?: )"[^"]+"`), `$1"<time>"`},
	{regexp.MustCompile(`("?resourceVersion"?: )"\d+"`), `$1"<rv>"`},
	{regexp.MustCompile(`("?uid"?: )("?)[0-9a-f-]{36}"?`), `$1$2<uid>$2`},
	{regexp.MustCompile(`(?m)(\s)(\d+[smhdy])+$`), `$1<age>`},
}

// normalize replaces what changes between runs: timestamps, resource
// versions, uids and ages in a table's last column.
func normalize(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.repl)
	}
	return s
}

// createNamespace creates ns for one subtest.
func createNamespace(t *testing.T, sys *harness.System, ns string) {
	t.Helper()
	if _, errOut, err := sys.Kubectl(t, "create", "namespace", ns); err != nil {
		t.Fatalf("kubectl create namespace %s: %v\n%s", ns, err, errOut)
	}
}

func testDiscovery(t *testing.T, sys *harness.System) {
	t.Run("version", func(t *testing.T) {
		client, _, err := sys.Kubectl(t, "version", "--client", "-o", "json")
		if err != nil {
			t.Fatalf("kubectl version --client: %v", err)
		}
		var v struct {
			ClientVersion struct{ GitVersion, Minor string }
		}
		if err := json.Unmarshal([]byte(client), &v); err != nil {
			t.Fatalf("kubectl version --client -o json: %v\n%s", err, client)
		}
		// Builds of kubectl mark their minor version "32+"; the warning
		// prints the number.
		minor := strings.TrimSuffix(v.ClientVersion.Minor, "+")
		out, errOut, err := sys.Kubectl(t, "version")
		if err != nil {
			t.Fatalf("kubectl version: %v\n%s", err, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3 || lines[0] != "Client Version: "+v.ClientVersion.GitVersion || !strings.HasPrefix(lines[1], "Kustomize Version: ") || lines[2] != "Server Version: v1.37.0-kplane" {
			t.Errorf("kubectl version printed\n%s\nwant the client, kustomize and server lines, server v1.37.0-kplane", out)
		}
		// kubectl warns when the server is more than one minor version
		// away; kplane reports 1.37.
		warn := fmt.Sprintf("WARNING: version difference between client (1.%s) and server (1.37) exceeds the supported minor version skew of +/-1\n", minor)
		if errOut != warn {
			t.Errorf("kubectl version: stderr\n%s\nwant\n%s", errOut, warn)
		}
	})
	t.Run("api-versions", func(t *testing.T) {
		out, errOut, err := sys.Kubectl(t, "api-versions")
		if err != nil {
			t.Fatalf("kubectl api-versions: %v\n%s", err, errOut)
		}
		// Every group/version core and crd serve, sorted as kubectl
		// sorts them.
		want := []string{
			"admissionregistration.k8s.io/v1",
			"apiextensions.k8s.io/v1",
			"apiregistration.k8s.io/v1",
			"authentication.k8s.io/v1",
			"authorization.k8s.io/v1",
			"coordination.k8s.io/v1",
			"events.k8s.io/v1",
			"rbac.authorization.k8s.io/v1",
			"v1",
		}
		if got := strings.Fields(out); !slices.Equal(got, want) {
			t.Errorf("kubectl api-versions: %q, want %q", got, want)
		}
	})
	t.Run("api-resources", func(t *testing.T) {
		out, errOut, err := sys.Kubectl(t, "api-resources")
		if err != nil {
			t.Fatalf("kubectl api-resources: %v\n%s", err, errOut)
		}
		rows := map[string]string{}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if header := strings.Join(strings.Fields(lines[0]), " "); header != "NAME SHORTNAMES APIVERSION NAMESPACED KIND" {
			t.Errorf("kubectl api-resources: header %q", lines[0])
		}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			rows[f[0]+" "+f[len(f)-3]] = strings.Join(f, " ")
		}
		for _, want := range []string{
			"configmaps cm v1 true ConfigMap",
			"namespaces ns v1 false Namespace",
			"secrets v1 true Secret",
			"serviceaccounts sa v1 true ServiceAccount",
			"events ev v1 true Event",
			"events ev events.k8s.io/v1 true Event",
			"roles rbac.authorization.k8s.io/v1 true Role",
			"clusterroles rbac.authorization.k8s.io/v1 false ClusterRole",
			"leases coordination.k8s.io/v1 true Lease",
			"apiservices apiregistration.k8s.io/v1 false APIService",
			"customresourcedefinitions crd,crds apiextensions.k8s.io/v1 false CustomResourceDefinition",
			"validatingwebhookconfigurations admissionregistration.k8s.io/v1 false ValidatingWebhookConfiguration",
			"selfsubjectreviews authentication.k8s.io/v1 false SelfSubjectReview",
			"tokenreviews authentication.k8s.io/v1 false TokenReview",
			"localsubjectaccessreviews authorization.k8s.io/v1 true LocalSubjectAccessReview",
			"selfsubjectaccessreviews authorization.k8s.io/v1 false SelfSubjectAccessReview",
			"selfsubjectrulesreviews authorization.k8s.io/v1 false SelfSubjectRulesReview",
			"subjectaccessreviews authorization.k8s.io/v1 false SubjectAccessReview",
		} {
			f := strings.Fields(want)
			if got := rows[f[0]+" "+f[len(f)-3]]; got != want {
				t.Errorf("kubectl api-resources: row %q, want %q", got, want)
			}
		}
	})
}

func testCreateGet(t *testing.T, sys *harness.System) {
	createNamespace(t, sys, "get")
	runSteps(t, sys, "get", []step{
		{name: "create", args: []string{"create", "configmap", "x", "--from-literal=a=b"}, stdout: "configmap/x created\n"},
		{name: "yaml", args: []string{"get", "cm", "x", "-o", "yaml"}, stdout: `apiVersion: v1
data:
  a: b
kind: ConfigMap
metadata:
  creationTimestamp: "<time>"
  name: x
  namespace: get
  resourceVersion: "<rv>"
  uid: <uid>
`},
		{name: "json", args: []string{"get", "cm", "x", "-o", "json"}, stdout: `{
    "apiVersion": "v1",
    "data": {
        "a": "b"
    },
    "kind": "ConfigMap",
    "metadata": {
        "creationTimestamp": "<time>",
        "name": "x",
        "namespace": "get",
        "resourceVersion": "<rv>",
        "uid": "<uid>"
    }
}
`},
		{name: "jsonpath", args: []string{"get", "cm", "x", "-o", "jsonpath={.data.a}"}, stdout: "b"},
		{name: "name", args: []string{"get", "cm", "x", "-o", "name"}, stdout: "configmap/x\n"},
		{name: "wide", args: []string{"get", "cm", "x", "-o", "wide"}, stdout: "NAME   DATA   AGE\nx      1      <age>\n"},
		{name: "table", args: []string{"get", "cm"}, stdout: "NAME   DATA   AGE\nx      1      <age>\n"},
		{name: "namespace table", args: []string{"get", "ns", "get"}, stdout: "NAME   STATUS   AGE\nget    Active   <age>\n"},
		{name: "dry-run server", args: []string{"create", "configmap", "dry", "--from-literal=a=b", "--dry-run=server", "-o", "yaml"}, stdout: `apiVersion: v1
data:
  a: b
kind: ConfigMap
metadata:
  creationTimestamp: "<time>"
  name: dry
  namespace: get
  uid: <uid>
`},
		{name: "dry-run stored nothing", args: []string{"get", "cm", "dry"}, fails: true,
			stderr: "Error from server (NotFound): configmaps \"dry\" not found\n"},
	})
}

func testApply(t *testing.T, sys *harness.System) {
	createNamespace(t, sys, "apply")
	manifest := func(value string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: " + value + "\n"
	}
	conflict := `error: Apply failed with 1 conflict: conflict with "kubectl": .data.a
Please review the fields above--they currently have other managers. Here
are the ways you can resolve this warning:
* If you intend to manage all of these fields, please re-run the apply
  command with the ` + "`--force-conflicts`" + ` flag.
* If you do not intend to manage all of the fields, please edit your
  manifest to remove references to the fields that should keep their
  current managers.
* You may co-own fields by updating your manifest to match the existing
  value; in this case, you'll become the manager if the other manager(s)
  stop managing the field (remove it from their configuration).
See https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts
`
	runSteps(t, sys, "apply", []step{
		{name: "created", manifest: manifest("b"), args: []string{"apply", "-f", "{file}"}, stdout: "configmap/x created\n"},
		{name: "unchanged", args: []string{"apply", "-f", "{file}"}, stdout: "configmap/x unchanged\n"},
		{name: "diff equal", args: []string{"diff", "-f", "{file}"}},
		{name: "configured", manifest: manifest("c"), args: []string{"apply", "-f", "{file}"}, stdout: "configmap/x configured\n"},
		{name: "applied value", args: []string{"get", "cm", "x", "-o", "jsonpath={.data.a}"}, stdout: "c"},
		{name: "server-side", manifest: strings.ReplaceAll(manifest("d"), "name: x", "name: ssa"), args: []string{"apply", "--server-side", "-f", "{file}"}, stdout: "configmap/ssa serverside-applied\n"},
		{name: "server-side again", args: []string{"apply", "--server-side", "-f", "{file}"}, stdout: "configmap/ssa serverside-applied\n"},
		{name: "server-side conflict", manifest: strings.ReplaceAll(manifest("e"), "name: x", "name: ssa"), args: []string{"apply", "--server-side", "--field-manager=other", "-f", "{file}"}, fails: true, stderr: conflict},
		{name: "server-side forced", args: []string{"apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "{file}"}, stdout: "configmap/ssa serverside-applied\n"},
		{name: "forced value", args: []string{"get", "cm", "ssa", "-o", "jsonpath={.data.a}"}, stdout: "e"},
	})
	// kubectl diff's output names temporary directories; what matters is
	// that only the changed field differs.
	t.Run("diff shows the change", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "x.yaml")
		if err := os.WriteFile(file, []byte(manifest("z")), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := sys.Kubectl(t, "-n", "apply", "diff", "-f", file)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("kubectl diff: %v, want exit status 1\n%s", err, errOut)
		}
		var changed []string
		for _, l := range strings.Split(out, "\n") {
			if (strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")) && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "+++") {
				changed = append(changed, l)
			}
		}
		if want := []string{"-  a: c", "+  a: z"}; !slices.Equal(changed, want) {
			t.Errorf("kubectl diff: changed lines %q, want %q\n%s", changed, want, out)
		}
	})
}

func testPatch(t *testing.T, sys *harness.System) {
	createNamespace(t, sys, "patch")
	runSteps(t, sys, "patch", []step{
		{name: "create", args: []string{"create", "configmap", "x", "--from-literal=a=b"}, stdout: "configmap/x created\n"},
		{name: "merge", args: []string{"patch", "cm", "x", "--type", "merge", "-p", `{"data":{"m":"1"}}`}, stdout: "configmap/x patched\n"},
		{name: "merge no change", args: []string{"patch", "cm", "x", "--type", "merge", "-p", `{"data":{"m":"1"}}`}, stdout: "configmap/x patched (no change)\n"},
		{name: "json", args: []string{"patch", "cm", "x", "--type", "json", "-p", `[{"op":"add","path":"/data/j","value":"2"},{"op":"remove","path":"/data/a"}]`}, stdout: "configmap/x patched\n"},
		{name: "strategic", args: []string{"patch", "cm", "x", "--type", "strategic", "-p", `{"data":{"s":"3","m":null}}`}, stdout: "configmap/x patched\n"},
		{name: "patched data", args: []string{"get", "cm", "x", "-o", "jsonpath={.data}"}, stdout: `{"j":"2","s":"3"}`},
		{name: "label", args: []string{"label", "cm", "x", "l=1"}, stdout: "configmap/x labeled\n"},
		{name: "label without overwrite", args: []string{"label", "cm", "x", "l=2"}, fails: true, stderr: "error: 'l' already has a value (1), and --overwrite is false\n"},
		{name: "label overwrite", args: []string{"label", "cm", "x", "l=2", "--overwrite"}, stdout: "configmap/x labeled\n"},
		{name: "labels", args: []string{"get", "cm", "x", "-o", "jsonpath={.metadata.labels}"}, stdout: `{"l":"2"}`},
		{name: "label removed", args: []string{"label", "cm", "x", "l-"}, stdout: "configmap/x unlabeled\n"},
		{name: "annotate", args: []string{"annotate", "cm", "x", "n=1"}, stdout: "configmap/x annotated\n"},
		{name: "annotate without overwrite", args: []string{"annotate", "cm", "x", "n=2"}, fails: true, stderr: "error: --overwrite is false but found the following declared annotation(s): 'n' already has a value (1)\n"},
		{name: "annotate overwrite", args: []string{"annotate", "cm", "x", "n=2", "--overwrite"}, stdout: "configmap/x annotated\n"},
		{name: "annotations", args: []string{"get", "cm", "x", "-o", "jsonpath={.metadata.annotations}"}, stdout: `{"n":"2"}`},
		{name: "annotation removed", args: []string{"annotate", "cm", "x", "n-"}, stdout: "configmap/x annotated\n"},
		{name: "nothing left", args: []string{"get", "cm", "x", "-o", "jsonpath={.metadata.labels}{.metadata.annotations}"}, stdout: ""},
	})
}

func testReplaceDelete(t *testing.T, sys *harness.System) {
	createNamespace(t, sys, "replace")
	if _, errOut, err := sys.Kubectl(t, "-n", "replace", "create", "configmap", "x", "--from-literal=a=b"); err != nil {
		t.Fatalf("kubectl create configmap: %v\n%s", err, errOut)
	}
	// The manifest carries the resourceVersion of now; the label below
	// makes it stale.
	stale, errOut, err := sys.Kubectl(t, "-n", "replace", "get", "cm", "x", "-o", "yaml")
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, errOut)
	}
	if _, errOut, err := sys.Kubectl(t, "-n", "replace", "label", "cm", "x", "moved=on"); err != nil {
		t.Fatalf("kubectl label: %v\n%s", err, errOut)
	}
	runSteps(t, sys, "replace", []step{
		{name: "stale resourceVersion", manifest: stale, args: []string{"replace", "-f", "{file}"}, fails: true,
			stderr: `Error from server (Conflict): error when replacing "{file}": Operation cannot be fulfilled on configmaps "x": the object has been modified; please apply your changes to the latest version and try again` + "\n"},
		{name: "current", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: replaced\n", args: []string{"replace", "-f", "{file}"}, stdout: "configmap/x replaced\n"},
		{name: "replaced value", args: []string{"get", "cm", "x", "-o", "jsonpath={.data.a}{.metadata.labels}"}, stdout: "replaced"},
		{name: "delete", args: []string{"delete", "cm", "x"}, stdout: "configmap \"x\" deleted\n"},
		{name: "deleted", args: []string{"get", "cm", "x"}, fails: true, stderr: "Error from server (NotFound): configmaps \"x\" not found\n"},
		{name: "delete again", args: []string{"delete", "cm", "x"}, fails: true, stderr: "Error from server (NotFound): configmaps \"x\" not found\n"},
	})
}

func testSelectors(t *testing.T, sys *harness.System) {
	createNamespace(t, sys, "select")
	for _, name := range []string{"s1", "s2", "s3", "s4"} {
		if _, errOut, err := sys.Kubectl(t, "-n", "select", "create", "configmap", name); err != nil {
			t.Fatalf("kubectl create configmap: %v\n%s", err, errOut)
		}
	}
	for name, value := range map[string]string{"s1": "b", "s2": "c", "s3": "d"} {
		if _, errOut, err := sys.Kubectl(t, "-n", "select", "label", "cm", name, "a="+value); err != nil {
			t.Fatalf("kubectl label: %v\n%s", err, errOut)
		}
	}
	runSteps(t, sys, "select", []step{
		{name: "equality", args: []string{"get", "cm", "-l", "a=b", "-o", "name"}, stdout: "configmap/s1\n"},
		{name: "set", args: []string{"get", "cm", "-l", "a in (b,c)", "-o", "name"}, stdout: "configmap/s1\nconfigmap/s2\n"},
		{name: "not in set", args: []string{"get", "cm", "-l", "a notin (b,c)", "-o", "name"}, stdout: "configmap/s3\nconfigmap/s4\n"},
		{name: "inequality", args: []string{"get", "cm", "-l", "a!=b", "-o", "name"}, stdout: "configmap/s2\nconfigmap/s3\nconfigmap/s4\n"},
		{name: "exists", args: []string{"get", "cm", "-l", "a", "-o", "name"}, stdout: "configmap/s1\nconfigmap/s2\nconfigmap/s3\n"},
		{name: "none", args: []string{"get", "cm", "-l", "a=zz"}, stderr: "No resources found in select namespace.\n"},
		{name: "field", args: []string{"get", "cm", "--field-selector", "metadata.name=s2", "-o", "name"}, stdout: "configmap/s2\n"},
		{name: "field inequality", args: []string{"get", "cm", "--field-selector", "metadata.name!=s2", "-o", "name"}, stdout: "configmap/s1\nconfigmap/s3\nconfigmap/s4\n"},
		{name: "field and label", args: []string{"get", "cm", "--field-selector", "metadata.name!=s2", "-l", "a", "-o", "name"}, stdout: "configmap/s1\nconfigmap/s3\n"},
		// ConfigMaps have no field labels of their own: kube answers with
		// its default conversion's words; namespaces have their own.
		{name: "unknown field of configmaps", args: []string{"get", "cm", "--field-selector", "data.a=x"}, fails: true,
			stderr: `Error from server (BadRequest): Unable to find "/v1, Resource=configmaps" that match label selector "", field selector "data.a=x": "data.a" is not a known field selector: only "metadata.name", "metadata.namespace"` + "\n"},
		{name: "unknown field of namespaces", args: []string{"get", "ns", "--field-selector", "spec.x=y"}, fails: true,
			stderr: `Error from server (BadRequest): Unable to find "/v1, Resource=namespaces" that match label selector "", field selector "spec.x=y": field label not supported: spec.x` + "\n"},
		{name: "namespace phase", args: []string{"get", "ns", "--field-selector", "status.phase=Active,metadata.name=select", "-o", "name"}, stdout: "namespace/select\n"},
	})
}

func testErrors(t *testing.T, sys *harness.System) {
	createNamespace(t, sys, "errors")
	invalid := `The ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')` + "\n"
	unknown := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unknown\ndta:\n  a: b\n"
	runSteps(t, sys, "errors", []step{
		{name: "not found", args: []string{"get", "cm", "nope"}, fails: true, stderr: "Error from server (NotFound): configmaps \"nope\" not found\n"},
		{name: "namespace not found", args: []string{"get", "ns", "nope"}, fails: true, stderr: "Error from server (NotFound): namespaces \"nope\" not found\n"},
		{name: "create", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", args: []string{"create", "-f", "{file}"}, stdout: "configmap/x created\n"},
		{name: "already exists", args: []string{"create", "-f", "{file}"}, fails: true, stderr: "Error from server (AlreadyExists): error when creating \"{file}\": configmaps \"x\" already exists\n"},
		// kubectl create configmap words the same server error its own way.
		{name: "already exists by generator", args: []string{"create", "configmap", "x"}, fails: true, stderr: "error: failed to create configmap: configmaps \"x\" already exists\n"},
		{name: "namespace already exists", args: []string{"create", "namespace", "default"}, fails: true, stderr: "Error from server (AlreadyExists): namespaces \"default\" already exists\n"},
		{name: "invalid create", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n", args: []string{"create", "-f", "{file}"}, fails: true, stderr: invalid},
		{name: "invalid apply", args: []string{"apply", "-f", "{file}"}, fails: true, stderr: invalid},
		{name: "unknown field create", manifest: unknown, args: []string{"create", "-f", "{file}"}, fails: true,
			stderr: "Error from server (BadRequest): error when creating \"{file}\": ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"dta\"\n"},
		{name: "unknown field apply", args: []string{"apply", "-f", "{file}"}, fails: true,
			stderr: "Error from server (BadRequest): error when creating \"{file}\": ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"dta\"\n"},
		{name: "nothing stored", args: []string{"get", "cm", "unknown"}, fails: true, stderr: "Error from server (NotFound): configmaps \"unknown\" not found\n"},
	})
}

// testWatch runs kubectl get -w and reads its rows while another kubectl
// makes the changes.
func testWatch(t *testing.T, sys *harness.System) {
	createNamespace(t, sys, "watch")
	if _, errOut, err := sys.Kubectl(t, "-n", "watch", "create", "configmap", "before"); err != nil {
		t.Fatalf("kubectl create configmap: %v\n%s", err, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows := streamKubectl(ctx, t, sys, "-n", "watch", "get", "cm", "-w", "--output-watch-events")
	next := func() []string {
		t.Helper()
		select {
		case row, ok := <-rows:
			if !ok {
				t.Fatal("kubectl get -w ended early")
			}
			return strings.Fields(row)
		case <-ctx.Done():
			t.Fatal("kubectl get -w printed nothing in time")
			return nil
		}
	}
	want := func(fields ...string) {
		t.Helper()
		got := next()
		// The last column is the age.
		if len(got) != len(fields)+1 || !slices.Equal(got[:len(fields)], fields) {
			t.Errorf("kubectl get -w: row %q, want %q and an age", got, fields)
		}
	}
	if got := next(); !slices.Equal(got, []string{"EVENT", "NAME", "DATA", "AGE"}) {
		t.Errorf("kubectl get -w: header %q", got)
	}
	// The listed object comes first; changes after it are watched from the
	// list's resourceVersion, so none is missed.
	want("ADDED", "before", "0")
	for _, args := range [][]string{
		{"create", "configmap", "w", "--from-literal=a=b"},
		{"label", "cm", "w", "x=y"},
		{"delete", "cm", "w"},
	} {
		if _, errOut, err := sys.Kubectl(t, append([]string{"-n", "watch"}, args...)...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
	}
	want("ADDED", "w", "1")
	want("MODIFIED", "w", "1")
	want("DELETED", "w", "1")
}

// streamKubectl runs kubectl, with the environment harness.Kubectl gives
// it, until ctx ends or the test does, sending its stdout line by line.
func streamKubectl(ctx context.Context, t *testing.T, sys *harness.System, args ...string) <-chan string {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig=" + sys.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(sys.DataDir, "kubectl-cache"), "HOME="+sys.DataDir)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kubectl: %v", err)
	}
	rows := make(chan string)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(rows)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case rows <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kubectl %s: stderr\n%s", strings.Join(args, " "), errOut.String())
		}
	})
	return rows
}

func testExplain(t *testing.T, sys *harness.System) {
	tests := []struct {
		args []string
		// want are lines of kube's explain output, in order.
		want []string
	}{
		{
			args: []string{"explain", "configmaps"},
			want: []string{
				"KIND:       ConfigMap",
				"VERSION:    v1",
				"DESCRIPTION:",
				"    ConfigMap holds configuration data for pods to consume.",
				"FIELDS:",
				"  apiVersion\t<string>",
				"  binaryData\t<map[string]string>",
				"  data\t<map[string]string>",
				"  immutable\t<boolean>",
				"  kind\t<string>",
				"  metadata\t<ObjectMeta>",
			},
		},
		{
			args: []string{"explain", "configmap.data"},
			want: []string{
				"KIND:       ConfigMap",
				"VERSION:    v1",
				"FIELD: data <map[string]string>",
				"DESCRIPTION:",
				"    Data contains the configuration data. Each key must consist of alphanumeric",
			},
		},
		{
			args: []string{"explain", "roles.rules.verbs"},
			want: []string{
				"GROUP:      rbac.authorization.k8s.io",
				"KIND:       Role",
				"VERSION:    v1",
				"FIELD: verbs <[]string>",
			},
		},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, err := sys.Kubectl(t, tt.args...)
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(tt.args, " "), err, errOut)
			}
			lines := strings.Split(out, "\n")
			i := 0
			for _, l := range lines {
				if i < len(tt.want) && l == tt.want[i] {
					i++
				}
			}
			if i < len(tt.want) {
				t.Errorf("kubectl %s: no line %q in order in\n%s", strings.Join(tt.args, " "), tt.want[i], out)
			}
		})
	}
}

func testReadyz(t *testing.T, sys *harness.System) {
	out, errOut, err := sys.Kubectl(t, "get", "--raw", "/readyz?verbose")
	if err != nil {
		t.Fatalf("kubectl get --raw /readyz?verbose: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "readyz check passed" {
		t.Errorf("readyz: last line %q, want %q", last, "readyz check passed")
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "[+]") || !strings.HasSuffix(l, " ok") {
			t.Errorf("readyz: line %q, want [+]<check> ok", l)
		}
	}
	// The checks every kube-apiserver has.
	for _, check := range []string{"[+]ping ok", "[+]log ok", "[+]shutdown ok"} {
		if !slices.Contains(lines, check) {
			t.Errorf("readyz: no %q in\n%s", check, out)
		}
	}
}

func testNamespaceDeletion(t *testing.T, sys *harness.System) {
	createNamespace(t, sys, "t1")
	for _, args := range [][]string{
		{"create", "configmap", "c", "--from-literal=a=b"},
		{"create", "secret", "generic", "s", "--from-literal=a=b"},
		{"create", "role", "r", "--verb=get", "--resource=configmaps"},
		{"create", "serviceaccount", "sa"},
	} {
		if _, errOut, err := sys.Kubectl(t, append([]string{"-n", "t1"}, args...)...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
	}
	// kubectl delete waits until the namespace is gone, which is after
	// its content is: every step after it sees the end state at once.
	runSteps(t, sys, "", []step{
		{name: "delete", args: []string{"delete", "ns", "t1"}, stdout: "namespace \"t1\" deleted\n"},
		{name: "namespace gone", args: []string{"get", "ns", "t1"}, fails: true, stderr: "Error from server (NotFound): namespaces \"t1\" not found\n"},
		{name: "content gone", args: []string{"-n", "t1", "get", "configmaps,secrets,roles,serviceaccounts"}, stderr: "No resources found in t1 namespace.\n"},
		{name: "create in the deleted namespace", args: []string{"-n", "t1", "create", "configmap", "late"}, fails: true, stderr: "error: failed to create configmap: namespaces \"t1\" not found\n"},
	})
}
