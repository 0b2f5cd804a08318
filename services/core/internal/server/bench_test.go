package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"kplane.dev/services/core/internal/coretest"
)

// benchConfigMaps is the configmaps client of a fresh one-replica
// installation, reached over TLS as the gateway reaches it.
func benchConfigMaps(b *testing.B) typedcorev1.ConfigMapInterface {
	b.Helper()
	c := coretest.Start(b, coretest.Options{})
	cs, err := kubernetes.NewForConfig(c.Replicas[0].Config)
	if err != nil {
		b.Fatal(err)
	}
	return cs.CoreV1().ConfigMaps(ns)
}

func BenchmarkCreate(b *testing.B) {
	cms := benchConfigMaps(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if _, err := cms.Create(ctx, configMap(fmt.Sprintf("cm-%d", i), "v"), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	cms := benchConfigMaps(b)
	ctx := context.Background()
	if _, err := cms.Create(ctx, configMap("got", "v"), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		rv   string
	}{{"consistent", ""}, {"rv=0", "0"}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := cms.Get(ctx, "got", metav1.GetOptions{ResourceVersion: bc.rv}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUpdate(b *testing.B) {
	cms := benchConfigMaps(b)
	ctx := context.Background()
	cm, err := cms.Create(ctx, configMap("updated", "0"), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// i starts at 1: the first update must change the data, or it is a
	// no-op that writes nothing.
	for i := 1; b.Loop(); i++ {
		cm.Data["v"] = fmt.Sprint(i)
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkList1000(b *testing.B) {
	cms := benchConfigMaps(b)
	ctx := context.Background()
	for i := range 1000 {
		if _, err := cms.Create(ctx, configMap(fmt.Sprintf("cm-%04d", i), "v"), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		rv   string
	}{{"consistent", ""}, {"rv=0", "0"}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				list, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: bc.rv})
				if err != nil {
					b.Fatal(err)
				}
				if len(list.Items) != 1000 {
					b.Fatalf("listed %d configmaps, want 1000", len(list.Items))
				}
			}
		})
	}
}

// BenchmarkWatch measures one update through the service until a watch
// open on it delivers the change.
func BenchmarkWatch(b *testing.B) {
	cms := benchConfigMaps(b)
	ctx := context.Background()
	cm, err := cms.Create(ctx, configMap("watched", "0"), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	for i := 1; b.Loop(); i++ {
		cm.Data["v"] = fmt.Sprint(i)
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("watch closed")
			}
			if got := ev.Object.(*corev1.ConfigMap).ResourceVersion; got != cm.ResourceVersion {
				b.Fatalf("event at rv %s, want %s", got, cm.ResourceVersion)
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("no event for rv %s within 30s", cm.ResourceVersion)
		}
	}
}
