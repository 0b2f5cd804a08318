package validating

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

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

	"kplane.dev/services/admission/internal/review"
)

// store holds policies and bindings as an informer's lister would.
type store struct {
	mu       sync.Mutex
	policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

func (s *store) Policies() ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*admissionregistrationv1.ValidatingAdmissionPolicy(nil), s.policies...), nil
}

func (s *store) Bindings() ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding(nil), s.bindings...), nil
}

// namespaces is a namespace lister over fixed namespaces.
type namespaces map[string]map[string]string

func (n namespaces) Get(_ context.Context, name string) (*corev1.Namespace, error) {
	l, ok := n[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, nil
}

// params serves param objects from memory, as an informer's cache
// would, and answers for the kinds it is told of.
type params struct {
	kinds   map[schema.GroupVersionKind]bool // namespaced
	objects []*unstructured.Unstructured
	err     error // returned by Get and List when set
}

func (p *params) Namespaced(_ context.Context, kind schema.GroupVersionKind) (bool, error) {
	namespaced, ok := p.kinds[kind]
	if !ok {
		return false, fmt.Errorf("%v: %w", kind, ErrKindUnknown)
	}
	return namespaced, nil
}

func (p *params) Get(_ context.Context, kind schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	if p.err != nil {
		return nil, p.err
	}
	for _, o := range p.objects {
		if o.GroupVersionKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: kind.Group, Resource: kind.Kind}, name)
}

func (p *params) List(_ context.Context, kind schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	if p.err != nil {
		return nil, p.err
	}
	var out []runtime.Object
	for _, o := range p.objects {
		if o.GroupVersionKind() == kind && o.GetNamespace() == namespace && selector.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}

var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	limitKind     = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Limit"}
)

func configMap(namespace, name string, lbls map[string]string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"data": data}}
	u.SetGroupVersionKind(configMapKind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

func limit(name string, max int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"max": max}}}
	u.SetGroupVersionKind(limitKind)
	u.SetName(name)
	return u
}

func deployment(name string, replicas int64, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	u.SetNamespace("default")
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

// write is a request to write obj (nil for a delete) over old (nil for
// a create).
func write(op admissionv1.Operation, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, sub string, obj, old *unstructured.Unstructured) *review.Attributes {
	o := obj
	if o == nil {
		o = old
	}
	return &review.Attributes{
		Request: &admissionv1.AdmissionRequest{
			UID:             "uid",
			Kind:            metav1.GroupVersionKind(gvk),
			Resource:        metav1.GroupVersionResource(gvr),
			SubResource:     sub,
			RequestKind:     (*metav1.GroupVersionKind)(&gvk),
			RequestResource: (*metav1.GroupVersionResource)(&gvr),
			Name:            o.GetName(),
			Namespace:       o.GetNamespace(),
			Operation:       op,
			UserInfo:        authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}},
		},
		Object:    obj,
		OldObject: old,
	}
}

var (
	deploymentKind     = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	deploymentResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

func createDeployment(replicas int64, lbls map[string]string) *review.Attributes {
	return write(admissionv1.Create, deploymentKind, deploymentResource, "", deployment("web", replicas, lbls), nil)
}

func rule(ops []admissionregistrationv1.OperationType, groups, versions, resources []string) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule:       admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources},
	}}
}

var allOps = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}

// policy is a policy on deployments with one validation, changed by
// edits.
func policy(name, expression string, edits ...func(*admissionregistrationv1.ValidatingAdmissionPolicy)) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
					rule([]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, []string{"apps"}, []string{"v1"}, []string{"deployments"}),
				},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: expression}},
		},
	}
	for _, e := range edits {
		e(p)
	}
	return p
}

func binding(name, policy string, edits ...func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, e := range edits {
		e(b)
	}
	return b
}

func newValidator(t *testing.T, s *store, p Params) *Validator {
	t.Helper()
	v, err := New(Config{
		Policies:   s,
		Namespaces: namespaces{"default": {"env": "prod"}, "dev": {"env": "dev"}},
		Params:     p,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// status returns the refusal err is, failing t when it is not one.
func status(t *testing.T, err error) metav1.Status {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a status error", err, err)
	}
	return se.ErrStatus
}

func ptr[T any](v T) *T { return &v }

const deniedPrefix = `deployments.apps "web" is forbidden: `
