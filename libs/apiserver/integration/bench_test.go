package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/apiserver/apitest"
)

// BenchmarkWatchFanout measures one write delivered to N client watches
// over HTTP: an op is a patch and the arrival of its event at every
// watcher. Served from etcd, every watcher is an etcd watch; from the
// watch cache, all share one.
func BenchmarkWatchFanout(b *testing.B) {
	for _, store := range []string{"etcd", "watchcache"} {
		for _, n := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("store=%s/watchers=%d", store, n), func(b *testing.B) {
				benchmarkFanout(b, store == "etcd", n)
			})
		}
	}
}

func benchmarkFanout(b *testing.B, direct bool, watchers int) {
	srv := apitest.Start(b, apitest.Options{Direct: direct})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cms := typedClient(b, srv.Config).CoreV1().ConfigMaps("bench")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "target"}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	arrived := make(chan struct{}, watchers)
	for range watchers {
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Modified {
					arrived <- struct{}{}
				}
			}
		}()
	}
	b.ResetTimer()
	for i := range b.N {
		patch := fmt.Sprintf(`{"data":{"n":"%d"}}`, i)
		if _, err := cms.Patch(ctx, "target", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		for range watchers {
			select {
			case <-arrived:
			case <-time.After(30 * time.Second):
				b.Fatal("an event did not reach every watcher")
			}
		}
	}
}
