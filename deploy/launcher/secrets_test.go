package launcher

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestStoreSecrets: a first run creates one Secret per bundle, its files
// the keys; a later run keeps them as they are; a run that finds only
// some creates none.
func TestStoreSecrets(t *testing.T) {
	ctx := context.Background()
	bundles := map[string]Bundle{
		"core":      {BundleCA: []byte("ca"), BundleCert: []byte("cert"), BundleKey: []byte("key")},
		NATSBundle:  {BundleNATSAuthConfig: []byte("authorization {}")},
		AdminBundle: {BundleKubeconfig: []byte("kubeconfig")},
	}
	client := fake.NewClientset()
	secrets := client.CoreV1().Secrets("kplane-system")

	created, err := StoreSecrets(ctx, secrets, "kp", bundles)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kp-admin", "kp-core", "kp-nats"}; !slices.Equal(created, want) {
		t.Fatalf("created %v, want %v", created, want)
	}
	for name, b := range bundles {
		s, err := secrets.Get(ctx, "kp-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(s.Data, b, slices.Equal) || s.Type != corev1.SecretTypeOpaque || s.Labels[BundleLabel] != name {
			t.Errorf("Secret kp-%s: type %s, labels %v, data %q; want the bundle's files %q", name, s.Type, s.Labels, s.Data, b)
		}
	}

	again := map[string]Bundle{}
	for name := range bundles {
		again[name] = Bundle{BundleCA: []byte("another CA")}
	}
	if created, err := StoreSecrets(ctx, secrets, "kp", again); err != nil || len(created) != 0 {
		t.Fatalf("second run: created %v, %v; want the Secrets kept", created, err)
	}
	if s, _ := secrets.Get(ctx, "kp-core", metav1.GetOptions{}); string(s.Data[BundleCA]) != "ca" {
		t.Fatalf("second run overwrote kp-core: ca.crt is %q", s.Data[BundleCA])
	}

	if err := secrets.Delete(ctx, "kp-nats", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err = StoreSecrets(ctx, secrets, "kp", again)
	if err == nil || !strings.Contains(err.Error(), "would mix two CAs") || len(created) != 0 {
		t.Fatalf("run with kp-nats missing: created %v, %v; want none and an error", created, err)
	}
	if _, err := secrets.Get(ctx, "kp-nats", metav1.GetOptions{}); err == nil {
		t.Fatal("run with kp-nats missing created it from another CA")
	}
}
