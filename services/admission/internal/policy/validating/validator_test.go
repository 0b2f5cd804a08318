package validating

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCompileOncePerGeneration shows that a policy is compiled when its
// generation changes and not otherwise: a spec changed under the same
// generation, which the API server never stores, keeps the old
// expressions.
func TestCompileOncePerGeneration(t *testing.T) {
	p := policy("max", "object.spec.replicas <= 5")
	s := &store{policies: []*P{p}, bindings: []*B{binding("max-b", "max")}}
	v := newValidator(t, s, nil)
	for range 3 {
		if _, err := v.Validate(context.Background(), createDeployment(9, nil)); err == nil {
			t.Fatal("generation 1 let 9 replicas through")
		}
	}
	same := p.DeepCopy()
	same.Spec.Validations[0].Expression = "true"
	s.mu.Lock()
	s.policies = []*P{same}
	s.mu.Unlock()
	if _, err := v.Validate(context.Background(), createDeployment(9, nil)); err == nil {
		t.Fatal("the policy was recompiled although its generation did not change")
	}
	if n := compilations(v); n != 1 {
		t.Fatalf("%d compilations for one generation, want 1", n)
	}
	next := same.DeepCopy()
	next.Generation = 2
	s.mu.Lock()
	s.policies = []*P{next}
	s.mu.Unlock()
	if _, err := v.Validate(context.Background(), createDeployment(9, nil)); err != nil {
		t.Fatalf("generation 2 still refuses: %v", err)
	}
	if n := compilations(v); n != 2 {
		t.Fatalf("%d compilations for two generations, want 2", n)
	}
	// A policy deleted is forgotten.
	s.mu.Lock()
	s.policies = nil
	s.mu.Unlock()
	if _, err := v.Validate(context.Background(), createDeployment(9, nil)); err != nil {
		t.Fatal(err)
	}
	v.compiled.mu.Lock()
	left := len(v.compiled.compiled)
	v.compiled.mu.Unlock()
	if left != 0 {
		t.Errorf("%d compiled policies kept after their deletion", left)
	}
}

func compilations(v *Validator) int {
	v.compiled.mu.Lock()
	defer v.compiled.mu.Unlock()
	return v.compiled.compilations
}

// TestConcurrentValidate runs writes at once through one Validator, for
// the race detector and for a shared compilation.
func TestConcurrentValidate(t *testing.T) {
	v := newValidator(t, &store{policies: []*P{policy("max", "object.spec.replicas <= 5")}, bindings: []*B{binding("max-b", "max")}}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			_, err := v.Validate(context.Background(), createDeployment(int64(i%2)*9, nil))
			if (err != nil) != (i%2 == 1) {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected outcome: %v", err)
	}
	if n := compilations(v); n != 1 {
		t.Errorf("%d compilations, want 1", n)
	}
}

// TestExempt shows that a policy matching everything is not asked about
// writes to policies and bindings, which kube never evaluates policies
// for, but is about webhook configurations, which kube evaluates.
func TestExempt(t *testing.T) {
	everything := policy("all", "false", func(p *P) {
		p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{rule(allOps, []string{"*"}, []string{"*"}, []string{"*", "*/*"})}
	})
	v := newValidator(t, &store{policies: []*P{everything}, bindings: []*B{binding("all-b", "all")}}, nil)
	group := admissionregistrationv1.SchemeGroupVersion
	for _, tc := range []struct {
		kind, resource, sub string
		exempt              bool
	}{
		{"ValidatingAdmissionPolicy", "validatingadmissionpolicies", "", true},
		{"ValidatingAdmissionPolicy", "validatingadmissionpolicies", "status", true},
		{"ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", "", true},
		{"MutatingAdmissionPolicy", "mutatingadmissionpolicies", "", true},
		{"MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", "", true},
		{"ValidatingWebhookConfiguration", "validatingwebhookconfigurations", "", false},
	} {
		t.Run(tc.resource+"/"+tc.sub, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(group.WithKind(tc.kind))
			obj.SetName("x")
			a := write(admissionv1.Create, group.WithKind(tc.kind), group.WithResource(tc.resource), tc.sub, obj, nil)
			_, err := v.Validate(context.Background(), a)
			if tc.exempt && err != nil {
				t.Errorf("exempt write refused: %v", err)
			}
			if !tc.exempt && err == nil {
				t.Error("write let through")
			}
		})
	}
}

// TestMetrics checks kube's check counter and duration histogram for
// each enforcement action. Kube labels a plain failed validation
// invalid_error, as here.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := &store{
		policies: []*P{
			policy("max", "object.spec.replicas <= 5"),
			policy("broken", "object.spec.missing", func(p *P) { p.Spec.FailurePolicy = ptr(admissionregistrationv1.Ignore) }),
		},
		bindings: []*B{
			binding("deny", "max"),
			binding("warn-audit", "max", func(b *B) {
				b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
			}),
			binding("broken-b", "broken"),
		},
	}
	v, err := New(Config{Policies: s, Namespaces: namespaces{"default": nil}, Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(context.Background(), createDeployment(9, nil)); err == nil {
		t.Fatal("let through")
	}
	want := `
# HELP apiserver_validating_admission_policy_check_total Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.
# TYPE apiserver_validating_admission_policy_check_total counter
apiserver_validating_admission_policy_check_total{enforcement_action="allow",error_type="compile_error",policy="broken",policy_binding="broken-b"} 1
apiserver_validating_admission_policy_check_total{enforcement_action="audit",error_type="invalid_error",policy="max",policy_binding="warn-audit"} 1
apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="invalid_error",policy="max",policy_binding="deny"} 1
apiserver_validating_admission_policy_check_total{enforcement_action="warn",error_type="invalid_error",policy="max",policy_binding="warn-audit"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "apiserver_validating_admission_policy_check_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "apiserver_validating_admission_policy_check_duration_seconds"); err != nil || n != 4 {
		t.Errorf("%d duration series (%v), want 4", n, err)
	}
	// A second Validator on the same registry shares the metrics.
	if _, err := New(Config{Policies: s, Namespaces: namespaces{}, Registerer: reg}); err != nil {
		t.Errorf("second Validator on one registry: %v", err)
	}
}

// TestNamespaceObjectOfMissingNamespace: a namespaced write whose
// namespace is gone is refused with kube's 404 once a binding matches.
func TestNamespaceObjectOfMissingNamespace(t *testing.T) {
	v := newValidator(t, &store{policies: []*P{policy("max", "true")}, bindings: []*B{binding("max-b", "max")}}, nil)
	a := createDeployment(1, nil)
	a.Request.Namespace = "gone"
	_, err := v.Validate(context.Background(), a)
	if st := status(t, err); st.Code != 404 || st.Message != `namespaces "gone" not found` {
		t.Errorf("status %+v, want namespace not found", st)
	}
}

// typedParams serves one typed ConfigMap without apiVersion and kind, as
// a typed cache returns it.
type typedParams struct{ *params }

func (typedParams) Get(_ context.Context, kind schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string]string{"max": "5"}}, nil
}

// TestTypedParam: expressions read a typed param's apiVersion and kind.
func TestTypedParam(t *testing.T) {
	p := policy("max", `object.spec.replicas <= int(params.data.max)`, func(p *P) {
		p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		p.Spec.Validations[0].MessageExpression = `params.kind + "/" + params.apiVersion + " " + params.metadata.name + " limits to " + params.data.max`
	})
	b := binding("max-b", "max", func(b *B) { b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits"} })
	v := newValidator(t, &store{policies: []*P{p}, bindings: []*B{b}}, typedParams{&params{kinds: map[schema.GroupVersionKind]bool{configMapKind: true}}})
	_, err := v.Validate(context.Background(), createDeployment(9, nil))
	check(t, &Result{}, err, denied("max", "max-b", "ConfigMap/v1 limits limits to 5"))
}
