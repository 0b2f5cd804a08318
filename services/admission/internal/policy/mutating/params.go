package mutating

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// params returns the params a binding applies its policy with, one
// invocation each, as kube's CollectParams does: a nil param when the
// policy or the binding names none, no param when none is found and the
// binding allows that, and kube's errors otherwise.
func (m *Mutator) params(ctx context.Context, kind *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, namespace string) ([]runtime.Object, error) {
	if kind == nil || ref == nil {
		return []runtime.Object{nil}, nil
	}
	gv, err := schema.ParseGroupVersion(kind.APIVersion)
	if err != nil || m.cfg.Params == nil {
		return nil, fmt.Errorf("paramKind kind `%v` not known", kind.String())
	}
	gvk := gv.WithKind(kind.Kind)
	namespaced, scopeKnown := true, false
	if s, ok := m.cfg.Params.(ParamScopes); ok {
		if namespaced, err = s.Namespaced(ctx, gvk); err != nil {
			return nil, fmt.Errorf("paramKind kind `%v` not known", kind.String())
		}
		scopeKnown = true
	}
	paramsNamespace := ""
	if namespaced {
		paramsNamespace = namespace
		if ref.Namespace != "" {
			paramsNamespace = ref.Namespace
		} else if paramsNamespace == "" && scopeKnown {
			return nil, errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	}
	var params []runtime.Object
	switch {
	case ref.Namespace != "" && !namespaced:
		return nil, errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	case ref.Name != "":
		if ref.Selector != nil {
			return nil, errors.New("paramRef.name and paramRef.selector are mutually exclusive")
		}
		p, err := m.cfg.Params.Get(ctx, gvk, paramsNamespace, ref.Name)
		switch {
		case err == nil:
			params = []runtime.Object{p}
		case apierrors.IsNotFound(err):
		default:
			return nil, err
		}
	case ref.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, err
		}
		if params, err = m.cfg.Params.List(ctx, gvk, paramsNamespace, sel); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("one of name or selector must be provided")
	}
	if len(params) == 0 && ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.DenyAction {
		return nil, errors.New("no params found for policy binding with `Deny` parameterNotFoundAction")
	}
	return params, nil
}
