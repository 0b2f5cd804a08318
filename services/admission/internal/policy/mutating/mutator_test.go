package mutating

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"kplane.dev/services/admission/internal/review"
)

// store holds policies, bindings, namespaces and params, as the informers
// behind the interfaces would.
type store struct {
	policies   []*admissionregistrationv1.MutatingAdmissionPolicy
	bindings   []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	namespaces map[string]*corev1.Namespace
	// params by kind, then namespace/name.
	params map[schema.GroupVersionKind][]*unstructured.Unstructured
}

func (s *store) Policies() ([]*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	return s.policies, nil
}

func (s *store) Bindings() ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	return s.bindings, nil
}

type namespaces map[string]*corev1.Namespace

func (n namespaces) Get(_ context.Context, name string) (*corev1.Namespace, error) {
	if ns, ok := n[name]; ok {
		return ns, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
}

type params map[schema.GroupVersionKind][]*unstructured.Unstructured

func (p params) Get(_ context.Context, kind schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	for _, o := range p[kind] {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: kind.Group, Resource: kind.Kind}, name)
}

func (p params) List(_ context.Context, kind schema.GroupVersionKind, namespace string, sel labels.Selector) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, o := range p[kind] {
		if o.GetNamespace() == namespace && sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}

var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	widgetKind    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
)

func configMap(name string, lbls map[string]string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "team-a"},
	}}
	if data != nil {
		u.Object["data"] = data
	}
	if lbls != nil {
		u.SetLabels(lbls)
	}
	return u
}

func widget() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "team-a"},
		"spec":     map[string]any{"replicas": int64(1), "size": map[string]any{"cpu": "1"}, "ports": []any{int64(80)}},
	}}
}

func write(obj *unstructured.Unstructured, op admissionv1.Operation) *review.Attributes {
	gvk := obj.GroupVersionKind()
	resource := map[schema.GroupVersionKind]string{configMapKind: "configmaps", widgetKind: "widgets"}[gvk]
	if gvk.Group == admissionregistrationv1.GroupName {
		resource = "mutatingadmissionpolicies"
	}
	return &review.Attributes{
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("req"),
			Kind:      metav1.GroupVersionKind(gvk),
			Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
			Namespace: obj.GetNamespace(),
			Name:      obj.GetName(),
			Operation: op,
			UserInfo:  authenticationv1.UserInfo{Username: "alice"},
		},
		Object: obj,
	}
}

// policy matches CREATE and UPDATE of configmaps and widgets.
func policy(name string, mutations ...admissionregistrationv1.Mutation) *admissionregistrationv1.MutatingAdmissionPolicy {
	return &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
				MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{
						APIGroups: []string{"", "example.com"}, APIVersions: []string{"v1"}, Resources: []string{"configmaps", "widgets"},
						Scope: ptr.To(admissionregistrationv1.AllScopes),
					},
				}}},
			},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations:          mutations,
		},
	}
}

func binding(name, policyName string) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	return &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policyName},
	}
}

func apply(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{
		PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr},
	}
}

func jsonPatch(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr},
	}
}

func newMutator(t *testing.T, s *store) *Mutator {
	t.Helper()
	ns := namespaces{
		"team-a": {ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"tier": "prod"}}},
		"team-b": {ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"tier": "dev"}}},
	}
	m, err := New(Config{Policies: s, Namespaces: ns, Params: params(s.params), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func paramConfigMap(namespace, name string, lbls map[string]string, data map[string]any) *unstructured.Unstructured {
	u := configMap(name, lbls, data)
	u.SetNamespace(namespace)
	return u
}

func TestMutate(t *testing.T) {
	addTeam := apply(`Object{metadata: Object.metadata{labels: {"team": "a"}}}`)
	tests := []struct {
		name  string
		store func(*store)
		write *review.Attributes
		// want is the mutated object; nil when unchanged.
		want *unstructured.Unstructured
		// wantErr is the refusal's message.
		wantErr string
	}{
		{
			name: "apply configuration on a configmap merges labels and data",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", apply(`Object{metadata: Object.metadata{labels: {"team": "a"}}, data: {"added": "yes"}}`))}
			},
			write: write(configMap("cm", map[string]string{"app": "web"}, map[string]any{"k": "v"}), admissionv1.Create),
			want:  configMap("cm", map[string]string{"app": "web", "team": "a"}, map[string]any{"k": "v", "added": "yes"}),
		},
		{
			name: "json patch on a configmap",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", jsonPatch(`[JSONPatch{op: "add", path: "/data/added", value: object.metadata.name + "-x"}]`))}
			},
			write: write(configMap("cm", nil, map[string]any{"k": "v"}), admissionv1.Create),
			want:  configMap("cm", nil, map[string]any{"k": "v", "added": "cm-x"}),
		},
		{
			name: "mutations run in order, each on the one before",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p",
					jsonPatch(`[JSONPatch{op: "add", path: "/data/first", value: "1"}]`),
					jsonPatch(`[JSONPatch{op: "add", path: "/data/second", value: object.data.first + "2"}]`),
				)}
			},
			write: write(configMap("cm", nil, map[string]any{"k": "v"}), admissionv1.Create),
			want:  configMap("cm", nil, map[string]any{"k": "v", "first": "1", "second": "12"}),
		},
		{
			name: "apply configuration on a custom object merges a map",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", apply(`Object{spec: Object.spec{size: {"memory": "1Gi"}}}`))}
			},
			write: write(widget(), admissionv1.Create),
			want: func() *unstructured.Unstructured {
				w := widget()
				_ = unstructured.SetNestedField(w.Object, map[string]any{"cpu": "1", "memory": "1Gi"}, "spec", "size")
				return w
			}(),
		},
		{
			// A custom object's schema is deduced: its lists are atomic.
			name: "apply configuration replaces a custom object's list",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", apply(`Object{spec: Object.spec{ports: [443]}}`))}
			},
			write: write(widget(), admissionv1.Create),
			want: func() *unstructured.Unstructured {
				w := widget()
				_ = unstructured.SetNestedSlice(w.Object, []any{int64(443)}, "spec", "ports")
				return w
			}(),
		},
		{
			// A configmap's schema is kube's: its data is a map.
			name: "apply configuration of the wrong type for a built-in kind",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", apply(`Object{data: "flat"}`))}
			},
			write:   write(configMap("cm", nil, map[string]any{"k": "v"}), admissionv1.Create),
			wantErr: "policy 'p' with binding 'pb' denied request: error applying patch: failed to convert patch object to typed object: .data: expected map, got &{flat}",
		},
		{
			name: "json patch on a custom object",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", jsonPatch(`[JSONPatch{op: "replace", path: "/spec/replicas", value: object.spec.replicas + 2}, JSONPatch{op: "add", path: "/spec/ports/-", value: 443}]`))}
			},
			write: write(widget(), admissionv1.Create),
			want: func() *unstructured.Unstructured {
				w := widget()
				_ = unstructured.SetNestedField(w.Object, int64(3), "spec", "replicas")
				_ = unstructured.SetNestedSlice(w.Object, []any{int64(80), int64(443)}, "spec", "ports")
				return w
			}(),
		},
		{
			name: "a param named by the binding",
			store: func(s *store) {
				p := policy("p", apply(`Object{metadata: Object.metadata{labels: {"team": params.data.team}}}`))
				p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
				s.bindings[0].Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "defaults", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
				s.params = map[schema.GroupVersionKind][]*unstructured.Unstructured{configMapKind: {
					paramConfigMap("team-a", "defaults", nil, map[string]any{"team": "from-param"}),
					paramConfigMap("team-b", "defaults", nil, map[string]any{"team": "other-namespace"}),
				}}
			},
			write: write(configMap("cm", nil, nil), admissionv1.Create),
			want:  configMap("cm", map[string]string{"team": "from-param"}, nil),
		},
		{
			name: "params selected by labels, one invocation each",
			store: func(s *store) {
				p := policy("p", jsonPatch(`[JSONPatch{op: "add", path: "/data/" + params.metadata.name, value: "set"}]`))
				p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
				s.bindings[0].Spec.ParamRef = &admissionregistrationv1.ParamRef{
					Namespace: "team-b", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "param"}},
					ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction),
				}
				s.params = map[schema.GroupVersionKind][]*unstructured.Unstructured{configMapKind: {
					paramConfigMap("team-b", "one", map[string]string{"role": "param"}, nil),
					paramConfigMap("team-b", "two", map[string]string{"role": "param"}, nil),
					paramConfigMap("team-b", "three", map[string]string{"role": "other"}, nil),
				}}
			},
			write: write(configMap("cm", nil, map[string]any{}), admissionv1.Create),
			want:  configMap("cm", nil, map[string]any{"one": "set", "two": "set"}),
		},
		{
			name: "a missing param under Deny refuses",
			store: func(s *store) {
				p := policy("p", addTeam)
				p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
				s.bindings[0].Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "missing", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
			},
			write:   write(configMap("cm", nil, nil), admissionv1.Create),
			wantErr: "policy 'p' with binding 'pb' denied request: no params found for policy binding with `Deny` parameterNotFoundAction",
		},
		{
			name: "a missing param under Allow skips the binding",
			store: func(s *store) {
				p := policy("p", addTeam)
				p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
				s.bindings[0].Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "missing", ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)}
			},
			write: write(configMap("cm", nil, nil), admissionv1.Create),
		},
		{
			name: "match conditions that hold",
			store: func(s *store) {
				p := policy("p", addTeam)
				p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "unlabelled", Expression: `!has(object.metadata.labels) || !("team" in object.metadata.labels)`}}
				p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "unlabelled", Expression: "variables.unlabelled"}, {Name: "create", Expression: `request.operation == "CREATE"`}}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			},
			write: write(configMap("cm", nil, nil), admissionv1.Create),
			want:  configMap("cm", map[string]string{"team": "a"}, nil),
		},
		{
			name: "a match condition that does not hold",
			store: func(s *store) {
				p := policy("p", addTeam)
				p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "create", Expression: `request.operation == "CREATE"`}}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			},
			write: write(configMap("cm", nil, nil), admissionv1.Update),
		},
		{
			name: "namespace selector that matches",
			store: func(s *store) {
				p := policy("p", addTeam)
				p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			},
			write: write(configMap("cm", nil, nil), admissionv1.Create),
			want:  configMap("cm", map[string]string{"team": "a"}, nil),
		},
		{
			name: "namespace selector that does not match",
			store: func(s *store) {
				p := policy("p", addTeam)
				p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"}}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			},
			write: write(configMap("cm", nil, nil), admissionv1.Create),
		},
		{
			name: "object selector on the binding",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", addTeam)}
				s.bindings[0].Spec.MatchResources = &admissionregistrationv1.MatchResources{
					ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				}
			},
			write: write(configMap("cm", map[string]string{"app": "db"}, nil), admissionv1.Create),
		},
		{
			name: "excluded resources",
			store: func(s *store) {
				p := policy("p", addTeam)
				p.Spec.MatchConstraints.ExcludeResourceRules = []admissionregistrationv1.NamedRuleWithOperations{{
					ResourceNames: []string{"cm"},
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"configmaps"}},
					},
				}}
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			},
			write: write(configMap("cm", nil, nil), admissionv1.Create),
		},
		{
			name: "a policy without a binding does nothing",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("other", addTeam)}
			},
			write: write(configMap("cm", nil, nil), admissionv1.Create),
		},
		{
			name: "failurePolicy Fail on a runtime error",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", jsonPatch(`[JSONPatch{op: "add", path: "/data/x", value: object.data.missing}]`))}
			},
			write:   write(configMap("cm", nil, map[string]any{"k": "v"}), admissionv1.Create),
			wantErr: `policy 'p' with binding 'pb' denied request: expression '[JSONPatch{op: "add", path: "/data/x", value: object.data.missing}]' resulted in error: no such key: missing`,
		},
		{
			name: "failurePolicy Ignore on a runtime error",
			store: func(s *store) {
				p := policy("p", jsonPatch(`[JSONPatch{op: "add", path: "/data/x", value: object.data.missing}]`))
				p.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{p}
			},
			write: write(configMap("cm", nil, map[string]any{"k": "v"}), admissionv1.Create),
		},
		{
			name: "an expression that does not compile fails under Fail",
			store: func(s *store) {
				s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", apply(`Object{`))}
			},
			write:   write(configMap("cm", nil, nil), admissionv1.Create),
			wantErr: "policy 'p' with binding 'pb' denied request: compilation failed: ERROR: <input>:1:8: Syntax error: mismatched input '<EOF>' expecting {'}', ',', '?', IDENTIFIER, ESC_IDENTIFIER}\n | Object{\n | .......^",
		},
		{
			name:  "writes to admission policies are exempt",
			store: func(s *store) { s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", addTeam)} },
			write: func() *review.Attributes {
				a := write(&unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": map[string]any{"name": "x"},
				}}, admissionv1.Create)
				// Even under a rule that would match it.
				a.Request.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
				return a
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &store{bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding("pb", "p")}}
			tt.store(s)
			m := newMutator(t, s)
			original := tt.write.Object.DeepCopy()
			got, err := m.Mutate(context.Background(), tt.write)
			if tt.wantErr != "" {
				var statusErr *apierrors.StatusError
				if !errors.As(err, &statusErr) {
					t.Fatalf("error %v (%T), want a status error %q", err, err, tt.wantErr)
				}
				if statusErr.ErrStatus.Message != tt.wantErr {
					t.Fatalf("error message\n%q\nwant\n%q", statusErr.ErrStatus.Message, tt.wantErr)
				}
				if statusErr.ErrStatus.Code != 403 {
					t.Errorf("code %d, want 403", statusErr.ErrStatus.Code)
				}
				return
			}
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mutated object (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(original, tt.write.Object); diff != "" {
				t.Errorf("the write's own object changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestCompileOnce(t *testing.T) {
	p := policy("p", apply(`Object{metadata: Object.metadata{labels: {"gen": "one"}}}`))
	s := &store{policies: []*admissionregistrationv1.MutatingAdmissionPolicy{p}, bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding("pb", "p")}}
	m := newMutator(t, s)
	mutate := func() string {
		t.Helper()
		got, err := m.Mutate(context.Background(), write(configMap("cm", nil, nil), admissionv1.Create))
		if err != nil {
			t.Fatal(err)
		}
		return got.GetLabels()["gen"]
	}
	for range 3 {
		if got := mutate(); got != "one" {
			t.Fatalf("label gen = %q, want one", got)
		}
	}
	if m.compiled.compiles != 1 {
		t.Fatalf("compiled %d times for one generation, want 1", m.compiled.compiles)
	}
	// A new generation is compiled anew, and its expressions apply.
	next := p.DeepCopy()
	next.Generation = 2
	next.Spec.Mutations[0].ApplyConfiguration.Expression = `Object{metadata: Object.metadata{labels: {"gen": "two"}}}`
	s.policies = []*admissionregistrationv1.MutatingAdmissionPolicy{next}
	if got := mutate(); got != "two" {
		t.Fatalf("label gen = %q after a new generation, want two", got)
	}
	if m.compiled.compiles != 2 {
		t.Fatalf("compiled %d times for two generations, want 2", m.compiled.compiles)
	}
	// A policy that is gone is forgotten.
	s.policies = nil
	mutate2, err := m.Mutate(context.Background(), write(configMap("cm", nil, nil), admissionv1.Create))
	if err != nil || mutate2 != nil {
		t.Fatalf("without policies: %v, %v; want no change", mutate2, err)
	}
	if n := len(m.compiled.byKey); n != 0 {
		t.Fatalf("%d compiled policies kept after their deletion, want 0", n)
	}
}

func TestReinvocation(t *testing.T) {
	// "a-observe" runs first and records the label "b"; "b-set" sets it
	// afterwards. Only when "a-observe" is IfNeeded does the second pass
	// run it again to see "b-set"'s change.
	observe := `Object{metadata: Object.metadata{labels: {"seen": has(object.metadata.labels) && "b" in object.metadata.labels ? object.metadata.labels["b"] : "none"}}}`
	setB := `Object{metadata: Object.metadata{labels: {"b": "x"}}}`
	tests := []struct {
		name     string
		reinvoke admissionregistrationv1.ReinvocationPolicyType
		// alone runs "a-observe" without "b-set".
		alone      bool
		laterSteps func(*unstructured.Unstructured)
		wantSeen   string
		// wantSecond is whether the second pass changes the object.
		wantSecond bool
	}{
		{name: "IfNeeded sees a later policy's change", reinvoke: admissionregistrationv1.IfNeededReinvocationPolicy, wantSeen: "x", wantSecond: true},
		{name: "Never does not", reinvoke: admissionregistrationv1.NeverReinvocationPolicy, wantSeen: "none"},
		{
			name: "IfNeeded sees a later step's change", reinvoke: admissionregistrationv1.IfNeededReinvocationPolicy,
			// A webhook after the policies sets b to y.
			laterSteps: func(u *unstructured.Unstructured) {
				l := u.GetLabels()
				l["b"] = "y"
				u.SetLabels(l)
			},
			wantSeen: "y", wantSecond: true,
		},
		{
			name: "IfNeeded alone sees a later step's change", reinvoke: admissionregistrationv1.IfNeededReinvocationPolicy, alone: true,
			laterSteps: func(u *unstructured.Unstructured) {
				u.SetLabels(map[string]string{"seen": "none", "b": "y"})
			},
			wantSeen: "y", wantSecond: true,
		},
		{
			name: "IfNeeded alone is not rerun for its own change", reinvoke: admissionregistrationv1.IfNeededReinvocationPolicy, alone: true,
			wantSeen: "none",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := policy("a-observe", apply(observe))
			a.Spec.ReinvocationPolicy = tt.reinvoke
			b := policy("b-set", apply(setB))
			s := &store{
				policies: []*admissionregistrationv1.MutatingAdmissionPolicy{b, a},
				bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding("a", "a-observe"), binding("b", "b-set")},
			}
			wantFirst := map[string]string{"seen": "none", "b": "x"}
			if tt.alone {
				s.policies = s.policies[1:]
				wantFirst = map[string]string{"seen": "none"}
			}
			m := newMutator(t, s)
			r := NewReinvocation()
			w := write(configMap("cm", nil, nil), admissionv1.Create)
			first, err := m.MutateWith(context.Background(), w, r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantFirst, first.GetLabels()); diff != "" {
				t.Fatalf("first pass labels (-want +got):\n%s", diff)
			}
			if !r.Changed() {
				t.Fatal("Changed is false after the policies changed the object")
			}
			if tt.laterSteps != nil {
				tt.laterSteps(first)
			}
			w.Object = first
			second, err := m.MutateWith(context.Background(), w, r)
			if err != nil {
				t.Fatal(err)
			}
			if (second != nil) != tt.wantSecond {
				t.Fatalf("second pass returned %v, want a change: %v", second, tt.wantSecond)
			}
			final := first
			if second != nil {
				final = second
			}
			if got := final.GetLabels()["seen"]; got != tt.wantSeen {
				t.Fatalf("label seen = %q after the second pass, want %q", got, tt.wantSeen)
			}
			if _, err := m.MutateWith(context.Background(), w, r); !apierrors.IsInternalError(err) {
				t.Fatalf("a third pass: %v, want an internal error", err)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	failing := func(name string) *admissionregistrationv1.MutatingAdmissionPolicy {
		return policy(name, jsonPatch(`[JSONPatch{op: "add", path: "/data/x", value: object.data.missing}]`))
	}
	s := &store{
		policies: []*admissionregistrationv1.MutatingAdmissionPolicy{failing("p1"), failing("p2")},
		bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding("b1", "p1"), binding("b2", "p2")},
	}
	m := newMutator(t, s)
	_, err := m.Mutate(context.Background(), write(configMap("cm", nil, map[string]any{}), admissionv1.Create))
	var statusErr *apierrors.StatusError
	if !errors.As(err, &statusErr) {
		t.Fatalf("error %v, want a status error", err)
	}
	st := statusErr.ErrStatus
	msg := func(p, b string) string {
		return "policy '" + p + "' with binding '" + b + `' denied request: expression '[JSONPatch{op: "add", path: "/data/x", value: object.data.missing}]' resulted in error: no such key: missing`
	}
	if st.Reason != metav1.StatusReasonInvalid || st.Code != 403 || st.Message != msg("p1", "b1") {
		t.Fatalf("status reason %q, code %d, message %q; want Invalid, 403 and the first failure", st.Reason, st.Code, st.Message)
	}
	want := []metav1.StatusCause{{Message: msg("p1", "b1")}, {Message: msg("p2", "b2")}}
	if diff := cmp.Diff(want, st.Details.Causes); diff != "" {
		t.Fatalf("causes (-want +got):\n%s", diff)
	}
	if st.Details.Kind != "configmaps" || st.Details.Name != "cm" {
		t.Fatalf("details name %q kind %q, want cm configmaps", st.Details.Name, st.Details.Kind)
	}
}

// scopedParams knows which param kinds are namespaced.
type scopedParams struct{ params }

func (scopedParams) Namespaced(_ context.Context, kind schema.GroupVersionKind) (bool, error) {
	return kind != schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, nil
}

func TestParamErrors(t *testing.T) {
	tests := []struct {
		name  string
		kind  admissionregistrationv1.ParamKind
		ref   admissionregistrationv1.ParamRef
		write *review.Attributes
		want  string
	}{
		{
			name:  "namespace for a cluster-scoped kind",
			kind:  admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "Namespace"},
			ref:   admissionregistrationv1.ParamRef{Namespace: "team-a", Name: "x"},
			write: write(configMap("cm", nil, nil), admissionv1.Create),
			want:  "policy 'p' with binding 'pb' denied request: paramRef.namespace must not be provided for a cluster-scoped `paramKind`",
		},
		{
			name: "namespaced kind for a cluster-scoped write",
			kind: admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			ref:  admissionregistrationv1.ParamRef{Name: "x"},
			write: func() *review.Attributes {
				a := write(widget(), admissionv1.Create)
				a.Request.Namespace = ""
				return a
			}(),
			want: "policy 'p' with binding 'pb' denied request: cannot use namespaced paramRef in policy binding that matches cluster-scoped resources",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy("p", apply(`Object{metadata: Object.metadata{labels: {"a": "b"}}}`))
			p.Spec.ParamKind = &tt.kind
			b := binding("pb", "p")
			tt.ref.ParameterNotFoundAction = ptr.To(admissionregistrationv1.AllowAction)
			b.Spec.ParamRef = &tt.ref
			s := &store{policies: []*admissionregistrationv1.MutatingAdmissionPolicy{p}, bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{b}}
			m, err := New(Config{Policies: s, Namespaces: namespaces{}, Params: scopedParams{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Mutate(context.Background(), tt.write)
			var statusErr *apierrors.StatusError
			if !errors.As(err, &statusErr) || statusErr.ErrStatus.Message != tt.want {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestMissingNamespace(t *testing.T) {
	s := &store{
		policies: []*admissionregistrationv1.MutatingAdmissionPolicy{policy("p", apply(`Object{metadata: Object.metadata{labels: {"a": "b"}}}`))},
		bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding("pb", "p")},
	}
	m := newMutator(t, s)
	cm := configMap("cm", nil, nil)
	cm.SetNamespace("gone")
	// Ignore does not let the write through: kube ends it with NotFound.
	s.policies[0].Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	_, err := m.Mutate(context.Background(), write(cm, admissionv1.Create))
	if !apierrors.IsNotFound(err) || err.Error() != `namespaces "gone" not found` {
		t.Fatalf("error %v, want namespaces \"gone\" not found", err)
	}
}

func TestDeleteIsNotMutated(t *testing.T) {
	p := policy("p", apply(`Object{metadata: Object.metadata{labels: {"a": "b"}}}`))
	p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	s := &store{policies: []*admissionregistrationv1.MutatingAdmissionPolicy{p}, bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding("pb", "p")}}
	m := newMutator(t, s)
	a := write(configMap("cm", nil, nil), admissionv1.Delete)
	a.OldObject, a.Object = a.Object, nil
	if got, err := m.Mutate(context.Background(), a); got != nil || err != nil {
		t.Fatalf("delete: %v, %v; want no change and no error", got, err)
	}
}
