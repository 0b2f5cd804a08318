package garbagecollector

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/services/core/internal/apiclient"
)

// TestDeleteRechecksChangedOwners: a dependent judged to have lost its
// owners is not deleted when its owner references changed after it was
// read (another worker orphaned it), and it is queued to be judged again;
// when something else changed, it is deleted all the same. This is the
// race kube's collector closes with a resourceVersion precondition.
func TestDeleteRechecksChangedOwners(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	clients, err := apiclient.New(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(clients)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{c: c, deleteQ: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.UID]())}
	t.Cleanup(r.deleteQ.ShutDown)
	ctx := context.Background()
	cms := clients.Kube.CoreV1().ConfigMaps("default")
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "00000000-0000-0000-0000-00000000000a"}

	for _, tt := range []struct {
		name        string
		change      func(cm *corev1.ConfigMap)
		wantDeleted bool
	}{
		{name: "owner references removed", change: func(cm *corev1.ConfigMap) { cm.OwnerReferences = nil }},
		{name: "a label added", change: func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"a": "b"} }, wantDeleted: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			read, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "dependent-", OwnerReferences: []metav1.OwnerReference{owner}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			changed := read.DeepCopy()
			tt.change(changed)
			if _, err := cms.Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			n := newNode(gvr, "ConfigMap", read)
			if err := r.delete(ctx, n, metav1.DeletePropagationBackground, read.ResourceVersion); err != nil {
				t.Fatalf("delete: %v", err)
			}
			_, err = cms.Get(ctx, read.Name, metav1.GetOptions{})
			switch {
			case tt.wantDeleted && !apierrors.IsNotFound(err):
				t.Errorf("get after delete = %v, want NotFound: only a label changed", err)
			case !tt.wantDeleted && err != nil:
				t.Errorf("get after delete = %v, want the dependent kept: its owner references changed since it was read", err)
			case !tt.wantDeleted && r.deleteQ.Len() != 1:
				t.Errorf("%d items queued, want the dependent queued to be judged again", r.deleteQ.Len())
			}
			for r.deleteQ.Len() > 0 {
				uid, _ := r.deleteQ.Get()
				r.deleteQ.Done(uid)
			}
		})
	}
}
