package validating

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// paramKind resolves a policy's paramKind; an error is the policy's
// configuration error, with kube's message.
func (e *evaluation) paramKind(ctx context.Context, gvk schema.GroupVersionKind) (*paramKind, error) {
	if e.v.cfg.Params == nil {
		return nil, fmt.Errorf("failed to find resource referenced by paramKind: '%v'", gvk)
	}
	namespaced, err := e.v.cfg.Params.Namespaced(ctx, gvk)
	if err != nil {
		e.v.cfg.Logger.WarnContext(ctx, "resolve paramKind", "kind", gvk.String(), "err", err)
		return nil, fmt.Errorf("failed to find resource referenced by paramKind: '%v'", gvk)
	}
	return &paramKind{gvk: gvk, namespaced: namespaced}, nil
}

// params collects the objects a binding's paramRef names or selects, as
// kube's CollectParams does: one nil param when the policy or the
// binding has none, and none at all when the objects are missing and the
// binding allows that. An error is the binding's configuration error.
func (e *evaluation) params(ctx context.Context, pk *admissionregistrationv1.ParamKind, kind *paramKind, ref *admissionregistrationv1.ParamRef) ([]runtime.Object, error) {
	if pk == nil || ref == nil {
		return []runtime.Object{nil}, nil
	}
	namespace := ""
	if kind.namespaced {
		namespace = e.a.Request.Namespace
		if ref.Namespace != "" {
			namespace = ref.Namespace
		} else if namespace == "" {
			return nil, errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	} else if ref.Namespace != "" {
		return nil, errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	var params []runtime.Object
	switch {
	case ref.Name != "":
		if ref.Selector != nil {
			return nil, errors.New("paramRef.name and paramRef.selector are mutually exclusive")
		}
		param, err := e.v.cfg.Params.Get(ctx, kind.gvk, namespace, ref.Name)
		switch {
		case err == nil:
			params = []runtime.Object{param}
		case apierrors.IsNotFound(err):
		default:
			return nil, paramsError(pk, err)
		}
	case ref.Selector != nil:
		selector, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, err
		}
		params, err = e.v.cfg.Params.List(ctx, kind.gvk, namespace, selector)
		if err != nil {
			return nil, paramsError(pk, err)
		}
	default:
		return nil, errors.New("one of name or selector must be provided")
	}
	if len(params) == 0 && ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.DenyAction {
		return nil, errors.New("no params found for policy binding with `Deny` parameterNotFoundAction")
	}
	for i, p := range params {
		typed, err := withKind(p, kind.gvk)
		if err != nil {
			return nil, err
		}
		params[i] = typed
	}
	return params, nil
}

// paramsError words the Params' errors for a paramKind that cannot be
// read as kube words them.
func paramsError(pk *admissionregistrationv1.ParamKind, err error) error {
	switch {
	case errors.Is(err, ErrNotSynced):
		return fmt.Errorf("paramKind kind `%v` not yet synced to use for admission", pk.String())
	case errors.Is(err, ErrKindUnknown):
		return fmt.Errorf("paramKind kind `%v` not known", pk.String())
	}
	return err
}

// withKind gives a param its apiVersion and kind, which expressions read
// and a typed object read from a cache lacks.
func withKind(p runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
	if p == nil || !p.GetObjectKind().GroupVersionKind().Empty() {
		return p, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return nil, fmt.Errorf("convert param: %w", err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
