package informers_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/services/authn/internal/apifixture"
	"kplane.dev/services/authn/internal/authenticator/serviceaccount/informers"
)

func TestGetter(t *testing.T) {
	api := apifixture.Start(t)
	ctx := context.Background()
	factory := clientinformers.NewSharedInformerFactory(api.Client, 0)
	g := informers.New(api.Client, factory)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, g.HasSynced) {
		t.Fatal("informers did not sync")
	}

	sa, err := api.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"}, Type: "bootstrap.kubernetes.io/token"}
	if _, err := api.Client.CoreV1().Secrets("kube-system").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("a new service account is found before the informer has it", func(t *testing.T) {
		got, err := g.GetServiceAccount(ctx, "default", "robot")
		if err != nil || got.UID != sa.UID {
			t.Fatalf("got %v, %v; want uid %s", got, err, sa.UID)
		}
	})
	t.Run("pods and nodes are read live", func(t *testing.T) {
		if _, err := g.GetPod(ctx, "default", "p"); err != nil {
			t.Fatal(err)
		}
		if _, err := g.GetNode(ctx, "n"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("missing objects are NotFound", func(t *testing.T) {
		for name, get := range map[string]func() error{
			"serviceaccount": func() error { _, err := g.GetServiceAccount(ctx, "default", "nobody"); return err },
			"secret":         func() error { _, err := g.GetSecret(ctx, "default", "nothing"); return err },
			"pod":            func() error { _, err := g.GetPod(ctx, "default", "none"); return err },
			"node":           func() error { _, err := g.GetNode(ctx, "none"); return err },
		} {
			if err := get(); !apierrors.IsNotFound(err) {
				t.Errorf("%s: got %v, want NotFound", name, err)
			}
		}
	})
	t.Run("bootstrap secrets come from the cache once it has them", func(t *testing.T) {
		boot := g.BootstrapSecrets()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := boot.GetSecret(ctx, "kube-system", "bootstrap-token-abcdef")
			if err == nil {
				break
			}
			if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
				t.Fatalf("bootstrap secret not in the cache: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("a deleted service account is gone", func(t *testing.T) {
		if err := api.Client.CoreV1().ServiceAccounts("default").Delete(ctx, "robot", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The informer sees the deletion a moment later.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := g.GetServiceAccount(ctx, "default", "robot")
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("got %v, want NotFound", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
