package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/services/core/internal/apiclient"
	"kplane.dev/services/core/internal/namespace/controller"
)

func TestEnsureSystemNamespacesFromSeveralReplicas(t *testing.T) {
	c := startServer(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = controller.EnsureSystemNamespaces(ctx, c.Kube)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Again, once they exist.
	if err := controller.EnsureSystemNamespaces(ctx, c.Kube); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ns.Status.Phase != corev1.NamespaceActive {
			t.Fatalf("namespace %s is %s", name, ns.Status.Phase)
		}
	}
	err := c.Kube.CoreV1().Namespaces().Delete(ctx, "kube-system", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `namespaces "kube-system" is forbidden: this namespace may not be deleted` {
		t.Fatalf("deleting kube-system: %v", err)
	}
}

func TestDefaultServiceAccount(t *testing.T) {
	c := startServer(t)
	apitest.Run(t, "serviceaccounts controller", controller.NewServiceAccounts(c).Run)
	ctx := context.Background()
	newNamespace(t, c, "team")
	var uid types.UID
	eventually(t, "default serviceaccount created", func() (bool, string) {
		sa, err := c.Kube.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		uid = sa.UID
		return true, ""
	})
	if err := c.Kube.CoreV1().ServiceAccounts("team").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "default serviceaccount recreated", func() (bool, string) {
		sa, err := c.Kube.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return sa.UID != uid, "the deleted one"
	})
}

// fill creates configmaps, serviceaccounts and widgets in ns; the widget
// "held" carries a finalizer no controller removes.
func fill(t *testing.T, c *apiclient.Clients, ns string) {
	t.Helper()
	ctx := context.Background()
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"k": "v"}}
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"w-1", "w-2", "held"} {
		w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": name}}}
		if name == "held" {
			w.SetFinalizers([]string{"example.com/hold"})
		}
		if _, err := c.Dynamic.Resource(widgets).Namespace(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// condition returns ns's condition of type typ.
func condition(ns *corev1.Namespace, typ corev1.NamespaceConditionType) corev1.NamespaceCondition {
	for _, c := range ns.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.NamespaceCondition{}
}

func TestNamespaceDeletionEmptiesTheNamespace(t *testing.T) {
	c := startServer(t)
	ctx := context.Background()
	newNamespace(t, c, "doomed")
	fill(t, c, "doomed")

	// kubectl delete ns doomed
	background := metav1.DeletePropagationBackground
	if err := c.Kube.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
	if err != nil || ns.Status.Phase != corev1.NamespaceTerminating || ns.DeletionTimestamp == nil {
		t.Fatalf("after delete: %v %+v", err, ns)
	}
	_, err = c.Kube.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being terminated` ||
		!apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		t.Fatalf("create in a terminating namespace: %v", err)
	}

	// The deleter starts after the delete, as after a restart: it finds
	// the namespace from its informer's initial list.
	apitest.Run(t, "namespace deleter", controller.NewNamespaceDeleter(c, controller.WithDeleterBackoff(20*time.Millisecond, 200*time.Millisecond)).Run)
	apitest.Run(t, "serviceaccounts controller", controller.NewServiceAccounts(c).Run)
	eventually(t, "content deleted but the held widget", func() (bool, string) {
		ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		remaining := condition(ns, corev1.NamespaceContentRemaining)
		finalizers := condition(ns, corev1.NamespaceFinalizersRemaining)
		ok := remaining.Status == corev1.ConditionTrue && remaining.Reason == "SomeResourcesRemain" &&
			remaining.Message == "Some resources are remaining: widgets.example.com has 1 resource instances" &&
			finalizers.Status == corev1.ConditionTrue && finalizers.Reason == "SomeFinalizersRemain" &&
			finalizers.Message == "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances" &&
			condition(ns, corev1.NamespaceDeletionDiscoveryFailure).Reason == "ResourcesDiscovered" &&
			condition(ns, corev1.NamespaceDeletionContentFailure).Reason == "ContentDeleted"
		return ok, fmt.Sprintf("%+v", ns.Status.Conditions)
	})
	cms, err := c.Kube.CoreV1().ConfigMaps("doomed").List(ctx, metav1.ListOptions{})
	if err != nil || len(cms.Items) != 0 {
		t.Fatalf("configmaps left: %v %d", err, len(cms.Items))
	}
	sas, err := c.Kube.CoreV1().ServiceAccounts("doomed").List(ctx, metav1.ListOptions{})
	if err != nil || len(sas.Items) != 0 {
		t.Fatalf("serviceaccounts left (the default one must not come back): %v %v", err, sas.Items)
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		t.Fatal("the namespace was finalized with content left")
	}

	// Its owner releases the held widget; the namespace goes.
	if _, err := c.Dynamic.Resource(widgets).Namespace("doomed").Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace gone", func() (bool, string) {
		_, err := c.Kube.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	left, err := c.Dynamic.Resource(widgets).Namespace("doomed").List(ctx, metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Fatalf("widgets left: %v %d", err, len(left.Items))
	}
	_, err = c.Kube.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `namespaces "doomed" not found` {
		t.Fatalf("create in a deleted namespace: %v", err)
	}
}
