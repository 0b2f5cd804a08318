package rego

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kplane.dev/libs/regopolicy"
	"kplane.dev/services/admission/internal/review"
)

// write is a request of user alice to write a resource of group "" (or
// of the object's group), its objects built from the name and labels.
func write(op admissionv1.Operation, resource, namespace, name string, labels, oldLabels map[string]string) *review.Attributes {
	kind := map[string]string{"configmaps": "ConfigMap", "namespaces": "Namespace", "pods": "Pod"}[resource]
	obj := func(labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		u.SetNamespace(namespace)
		u.SetName(name)
		u.SetLabels(labels)
		return u
	}
	a := &review.Attributes{Request: &admissionv1.AdmissionRequest{
		UID:       "7",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: kind},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: resource},
		Name:      name,
		Namespace: namespace,
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev"}},
	}}
	if op != admissionv1.Delete {
		a.Object = obj(labels)
	}
	if op == admissionv1.Update || op == admissionv1.Delete {
		a.OldObject = obj(oldLabels)
	}
	return a
}

func newPolicies(t *testing.T, cfg Config, modules map[string]string) *Policies {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.engine.SetSource(context.Background(), "test", modules); err != nil {
		t.Fatal(err)
	}
	return p
}

func readExample(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "policies", "require-team-label.rego"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// wantStatus checks that err is a status error of code, reason and
// message.
func wantStatus(t *testing.T, err error, code int32, reason metav1.StatusReason, message string) {
	t.Helper()
	se, ok := err.(*apierrors.StatusError)
	if !ok {
		t.Fatalf("error %v (%T), want a status error", err, err)
	}
	s := se.Status()
	if s.Code != code || s.Reason != reason || !strings.Contains(s.Message, message) {
		t.Errorf("status %d %s %q, want %d %s with %q", s.Code, s.Reason, s.Message, code, reason, message)
	}
}

// TestExample runs the shipped example policy.
func TestExample(t *testing.T) {
	p := newPolicies(t, Config{}, map[string]string{"example.rego": readExample(t)})
	team := func(name string) map[string]string { return map[string]string{"team": name} }
	cases := []struct {
		name     string
		write    *review.Attributes
		denied   string
		warnings []string
	}{
		{"create without the label", write(admissionv1.Create, "namespaces", "", "scratch", nil, nil),
			`namespaces "scratch" is forbidden: namespace "scratch" has no team label`, nil},
		{"create with it", write(admissionv1.Create, "namespaces", "", "scratch", team("a"), nil), "", nil},
		{"update removing it", write(admissionv1.Update, "namespaces", "", "scratch", nil, team("a")),
			`namespaces "scratch" is forbidden: namespace "scratch" has no team label`, nil},
		{"update changing it", write(admissionv1.Update, "namespaces", "", "scratch", team("b"), team("a")),
			"", []string{`namespace "scratch" moves from team "a" to "b"`}},
		{"delete", write(admissionv1.Delete, "namespaces", "", "scratch", nil, nil), "", nil},
		{"another resource", write(admissionv1.Create, "configmaps", "default", "x", nil, nil), "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			warnings, err := p.Validate(context.Background(), c.write)
			if !slices.Equal(warnings, c.warnings) {
				t.Errorf("warnings %q, want %q", warnings, c.warnings)
			}
			if c.denied == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, c.denied)
			if msg := err.(*apierrors.StatusError).Status().Message; msg != c.denied {
				t.Errorf("message %q, want exactly %q", msg, c.denied)
			}
		})
	}
}

// TestContract checks the input, the merging of every module's messages
// and the form of a refusal.
func TestContract(t *testing.T) {
	cases := []struct {
		name     string
		modules  map[string]string
		write    *review.Attributes
		denied   string
		warnings []string
	}{
		{"messages of every module, sorted, without duplicates, warnings too", map[string]string{
			"a.rego": "package kplane.admission\ndeny contains \"b\" if true\ndeny contains \"a\" if true\nwarn contains \"w2\" if true",
			"b.rego": "package kplane.admission.other\ndeny contains \"a\" if true\nwarn contains \"w1\" if true",
		}, write(admissionv1.Create, "configmaps", "default", "x", nil, nil), `configmaps "x" is forbidden: a, b`, []string{"w1", "w2"}},
		{"warn only", map[string]string{"a.rego": "package kplane.admission\nwarn contains \"careful\" if true"},
			write(admissionv1.Create, "configmaps", "default", "x", nil, nil), "", []string{"careful"}},
		{"the request's fields", map[string]string{"a.rego": `package kplane.admission
deny contains "all there" if {
	input.uid == "7"
	input.kind == {"group": "", "version": "v1", "kind": "ConfigMap"}
	input.resource.resource == "configmaps"
	input.operation == "UPDATE"
	input.namespace == "default"
	input.name == "x"
	input.userInfo.username == "alice"
	"dev" in input.userInfo.groups
	input.object.metadata.labels.app == "new"
	input.oldObject.metadata.labels.app == "old"
}`}, write(admissionv1.Update, "configmaps", "default", "x", map[string]string{"app": "new"}, map[string]string{"app": "old"}),
			`configmaps "x" is forbidden: all there`, nil},
		{"no object on delete", map[string]string{"a.rego": "package kplane.admission\ndeny contains \"gone\" if {\n\tinput.object == null\n\tinput.oldObject.metadata.name == \"x\"\n}"},
			write(admissionv1.Delete, "configmaps", "default", "x", nil, nil), `configmaps "x" is forbidden: gone`, nil},
		{"no name yet", map[string]string{"a.rego": "package kplane.admission\ndeny contains \"no\" if true"},
			write(admissionv1.Create, "configmaps", "default", "", nil, nil), `configmaps is forbidden: no`, nil},
		{"a group's resource", map[string]string{"a.rego": "package kplane.admission\ndeny contains \"no\" if true"},
			func() *review.Attributes {
				a := write(admissionv1.Create, "configmaps", "default", "d", nil, nil)
				a.Request.Resource = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
				return a
			}(), `deployments.apps "d" is forbidden: no`, nil},
		{"admission configuration kinds are subject to the policies", map[string]string{"a.rego": "package kplane.admission\ndeny contains \"no webhooks\" if input.kind.kind == \"ValidatingWebhookConfiguration\""},
			func() *review.Attributes {
				a := write(admissionv1.Create, "configmaps", "", "hook", nil, nil)
				a.Request.Kind = metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}
				a.Request.Resource = metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
				return a
			}(), `validatingwebhookconfigurations.admissionregistration.k8s.io "hook" is forbidden: no webhooks`, nil},
		{"nothing to say", map[string]string{"a.rego": "package kplane.admission\ndeny contains \"no\" if input.operation == \"CONNECT\""},
			write(admissionv1.Create, "configmaps", "default", "x", nil, nil), "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPolicies(t, Config{}, c.modules)
			warnings, err := p.Validate(context.Background(), c.write)
			if !slices.Equal(warnings, c.warnings) {
				t.Errorf("warnings %q, want %q", warnings, c.warnings)
			}
			if c.denied == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantStatus(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, c.denied)
			if msg := err.(*apierrors.StatusError).Status().Message; msg != c.denied {
				t.Errorf("message %q, want exactly %q", msg, c.denied)
			}
		})
	}
}

// TestPackages: modules outside kplane.admission do not compile.
func TestPackages(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = p.engine.SetSource(context.Background(), "test", map[string]string{"a.rego": "package kplane.authz.a\ndeny contains \"x\" if true"})
	if err == nil || !strings.Contains(err.Error(), "neither kplane.admission nor under it") {
		t.Fatalf("compile error %v, want one naming the package", err)
	}
}

// TestEvaluationFailure: a policy that fails at evaluation refuses the
// writes it fails on with an internal error saying why, and no other.
func TestEvaluationFailure(t *testing.T) {
	p := newPolicies(t, Config{}, map[string]string{
		"conflict.rego": `package kplane.admission.conflict

probe := "a" if input.name == "probe"

probe := "b" if input.name == "probe"

deny contains "never" if probe == "c"
`,
		"number.rego": "package kplane.admission.number\nwarn contains 42 if input.name == \"number\"",
	})
	_, err := p.Validate(context.Background(), write(admissionv1.Create, "configmaps", "default", "probe", nil, nil))
	wantStatus(t, err, http.StatusInternalServerError, metav1.StatusReasonInternalError, "the Rego admission policies could not decide the write")
	wantStatus(t, err, http.StatusInternalServerError, metav1.StatusReasonInternalError, "conflict")
	_, err = p.Validate(context.Background(), write(admissionv1.Create, "configmaps", "default", "number", nil, nil))
	wantStatus(t, err, http.StatusInternalServerError, metav1.StatusReasonInternalError, "kplane.admission.number.warn holds")
	if _, err := p.Validate(context.Background(), write(admissionv1.Create, "configmaps", "default", "other", nil, nil)); err != nil {
		t.Errorf("a write the policies do not fail on: %v", err)
	}
}

// TestPolicyConfigMapsExempt: a policy that refuses everything cannot
// refuse the fix of the policy ConfigMaps, and only of them.
func TestPolicyConfigMapsExempt(t *testing.T) {
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	p := newPolicies(t, Config{Client: client, Namespace: "kube-system"},
		map[string]string{"a.rego": "package kplane.admission\ndeny contains \"everything\" if true"})
	policy := map[string]string{PolicyLabel: "true"}
	cases := []struct {
		name   string
		write  *review.Attributes
		exempt bool
	}{
		{"update of a policy", write(admissionv1.Update, "configmaps", "kube-system", "p", policy, policy), true},
		{"delete of a policy", write(admissionv1.Delete, "configmaps", "kube-system", "p", nil, policy), true},
		{"labelling a ConfigMap a policy", write(admissionv1.Create, "configmaps", "kube-system", "p", policy, nil), true},
		{"unlabelling a policy", write(admissionv1.Update, "configmaps", "kube-system", "p", nil, policy), true},
		{"another ConfigMap there", write(admissionv1.Update, "configmaps", "kube-system", "p", nil, nil), false},
		{"label false", write(admissionv1.Create, "configmaps", "kube-system", "p", map[string]string{PolicyLabel: "false"}, nil), false},
		{"a labelled ConfigMap elsewhere", write(admissionv1.Create, "configmaps", "default", "p", policy, nil), false},
		{"a labelled namespace", write(admissionv1.Create, "namespaces", "kube-system", "kube-system", policy, nil), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.Validate(context.Background(), c.write)
			if c.exempt && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !c.exempt && !apierrors.IsForbidden(err) {
				t.Errorf("error %v, want forbidden", err)
			}
		})
	}
	// Without the ConfigMap source there are no policy ConfigMaps.
	p = newPolicies(t, Config{}, map[string]string{"a.rego": "package kplane.admission\ndeny contains \"everything\" if true"})
	if _, err := p.Validate(context.Background(), write(admissionv1.Update, "configmaps", "kube-system", "p", policy, policy)); !apierrors.IsForbidden(err) {
		t.Errorf("without ConfigMap source: error %v, want forbidden", err)
	}
}

// TestNoPolicies: without a module that defines deny or warn, a write
// costs no evaluation, nor an allocation.
func TestNoPolicies(t *testing.T) {
	a := write(admissionv1.Update, "configmaps", "default", "x", map[string]string{"app": "new"}, nil)
	for name, modules := range map[string]map[string]string{
		"no module":    nil,
		"helpers only": {"a.rego": "package kplane.admission\nhelper := 1"},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPolicies(t, Config{}, modules)
			allocs := testing.AllocsPerRun(100, func() {
				if w, err := p.Validate(context.Background(), a); w != nil || err != nil {
					t.Fatalf("validate: %q %v", w, err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per write, want none", allocs)
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	a := write(admissionv1.Update, "configmaps", "default", "x", map[string]string{"app": "new"}, nil)
	for name, modules := range map[string]map[string]string{
		"none": nil,
		"one":  {"a.rego": "package kplane.admission\ndeny contains \"no\" if input.name == \"y\""},
	} {
		b.Run(name, func(b *testing.B) {
			p, err := New(Config{})
			if err != nil {
				b.Fatal(err)
			}
			if err := p.engine.SetSource(context.Background(), "test", modules); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := p.Validate(context.Background(), a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDir: the directory is loaded by New, a broken module there fails
// New, and its changes are reloaded, a broken one keeping the last good
// set.
func TestDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "p.rego")
	writeFile := func(src string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("package kplane.admission\ndeny contains \"bad\" if")
	if _, err := New(Config{Dir: dir}); err == nil || !strings.Contains(err.Error(), "p.rego") {
		t.Fatalf("New with a broken directory: %v, want an error naming p.rego", err)
	}
	if _, err := New(Config{Dir: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("New with a missing directory succeeded")
	}

	writeFile("package kplane.admission\ndeny contains \"first\" if true\n")
	p, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasSynced() {
		t.Error("not synced without ConfigMaps")
	}
	refusal := func() string {
		t.Helper()
		_, err := p.Validate(ctx, write(admissionv1.Create, "configmaps", "default", "x", nil, nil))
		if err == nil {
			return ""
		}
		return err.Error()
	}
	sync := func() {
		t.Helper()
		if changed, err := p.dir.Sync(ctx); !changed {
			t.Fatalf("the change was not seen (%v)", err)
		}
	}
	if got := refusal(); !strings.HasSuffix(got, ": first") {
		t.Fatalf("loaded: refusal %q", got)
	}
	writeFile("package kplane.admission\ndeny contains \"second\" if true\n")
	sync()
	if got := refusal(); !strings.HasSuffix(got, ": second") {
		t.Errorf("reloaded: refusal %q", got)
	}
	writeFile("package kplane.admission\ndeny contains \"third\" if {\n")
	sync()
	if got := refusal(); !strings.HasSuffix(got, ": second") {
		t.Errorf("broken edit: refusal %q, want the last good set's", got)
	}
	// The ConfigMaps' modules join the directory's.
	if err := p.engine.SetSource(ctx, regopolicy.ConfigMapSource, regopolicy.ConfigMapModules([]*corev1.ConfigMap{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "p"},
		Data:       map[string]string{"p.rego": "package kplane.admission.cm\ndeny contains \"from a configmap\" if true\n"},
	}})); err == nil {
		t.Error("the ConfigMap's module compiled with the directory's broken")
	}
	writeFile("package kplane.admission\ndeny contains \"fixed\" if true\n")
	sync()
	if got := refusal(); !strings.HasSuffix(got, ": fixed, from a configmap") {
		t.Errorf("fixed: refusal %q, want both sources'", got)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	sync()
	if got := refusal(); !strings.HasSuffix(got, ": from a configmap") {
		t.Errorf("file removed: refusal %q", got)
	}
}

// TestRun follows a directory until the context ends: a new file is in
// force within a few polls.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	p, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package kplane.admission\nwarn contains \"hot\" if true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := write(admissionv1.Create, "configmaps", "default", "x", nil, nil)
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		w, err := p.Validate(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(w, []string{"hot"}) {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("the new file is not in force: warnings %q", w)
		case <-tick.C:
		}
	}
}

// TestHasSynced: with a ConfigMap source, not before Run listed them.
func TestHasSynced(t *testing.T) {
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Client: client, Namespace: "kube-system"})
	if err != nil {
		t.Fatal(err)
	}
	if p.HasSynced() {
		t.Error("synced before the ConfigMaps were listed")
	}
	if _, err := New(Config{Client: client}); err == nil {
		t.Error("a ConfigMap source without a namespace was accepted")
	}
}
