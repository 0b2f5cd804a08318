package routing

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"
)

// builtinPriority is kube-apiserver's ordering of a group/version it
// serves itself (its apiVersionPriorities), so discovery lists groups in
// the order kubectl users know.
type builtinPriority struct {
	gv             schema.GroupVersion
	group, version int32
	// crd marks the group crd serves; core serves the others.
	crd bool
}

// builtins are the group/versions core and crd serve.
func builtins() []builtinPriority {
	return []builtinPriority{
		{schema.GroupVersion{Version: "v1"}, 18000, 1, false},
		{schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1"}, 18000, 15, false},
		{schema.GroupVersion{Group: "events.k8s.io", Version: "v1"}, 17750, 15, false},
		{schema.GroupVersion{Group: "authentication.k8s.io", Version: "v1"}, 17700, 15, false},
		{schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"}, 17600, 15, false},
		{schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}, 17000, 15, false},
		{schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"}, 16700, 15, true},
		{schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1"}, 16700, 15, false},
		{schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}, 16500, 15, false},
	}
}

// APIServiceName is the name of gv's APIService, "<version>.<group>"
// ("v1." for the legacy group).
func APIServiceName(gv schema.GroupVersion) string {
	return gv.Version + "." + gv.Group
}

// BuiltinAPIServices are the local APIServices of the group/versions core
// serves, and crd when withCRD.
func BuiltinAPIServices(withCRD bool) []*apiregistrationv1.APIService {
	var out []*apiregistrationv1.APIService
	for _, b := range builtins() {
		if b.crd && !withCRD {
			continue
		}
		out = append(out, &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{
				Name: APIServiceName(b.gv),
				// kube marks the APIServices it registers itself so
				// they can be told from the user's.
				Labels: map[string]string{"kube-aggregator.kubernetes.io/automanaged": "onstart"},
			},
			Spec: apiregistrationv1.APIServiceSpec{
				Group:                b.gv.Group,
				Version:              b.gv.Version,
				GroupPriorityMinimum: b.group,
				VersionPriority:      b.version,
			},
		})
	}
	return out
}

// EnsureBuiltins creates the built-in APIServices that are missing and
// puts back the spec of those that were changed. Gateways racing to do
// the same are not an error.
func EnsureBuiltins(ctx context.Context, c apiregistrationclient.APIServiceInterface, withCRD bool) error {
	for _, want := range BuiltinAPIServices(withCRD) {
		got, err := c.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := c.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create apiservice %s: %w", want.Name, err)
			}
			continue
		case err != nil:
			return fmt.Errorf("read apiservice %s: %w", want.Name, err)
		}
		if apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
			continue
		}
		got.Spec = want.Spec
		if _, err := c.Update(ctx, got, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("restore apiservice %s: %w", want.Name, err)
		}
	}
	return nil
}

// coreServes reports whether gv is one of the group/versions core serves.
func coreServes(gv schema.GroupVersion) bool {
	for _, b := range builtins() {
		if b.gv == gv {
			return !b.crd
		}
	}
	return false
}
