package etcd3_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/etcd3"
)

func benchStore(b *testing.B) (*etcd3.Store, storage.Keys) {
	b.Helper()
	client := etcdtest.Start(b).Client(b)
	objs := configMaps(b)
	return etcd3.New(client, objs, objs.New), storage.NewKeys("", "", "configmaps")
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"key": "a value of a few dozen bytes, like a small config"},
	}
}

func BenchmarkGet(b *testing.B) {
	s, keys := benchStore(b)
	ctx := context.Background()
	if _, err := s.Create(ctx, keys.Object("ns", "a"), configMap("a")); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(ctx, keys.Object("ns", "a"), storage.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkListConsistent1000(b *testing.B) {
	s, keys := benchStore(b)
	ctx := context.Background()
	for i := range 1000 {
		name := fmt.Sprintf("cm-%04d", i)
		if _, err := s.Create(ctx, keys.Object("ns", name), configMap(name)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		res, err := s.List(ctx, keys.Prefix(), storage.ListOptions{})
		if err != nil || len(res.Items) != 1000 {
			b.Fatalf("list: %d items, %v", len(res.Items), err)
		}
	}
}

func BenchmarkCreate(b *testing.B) {
	s, keys := benchStore(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		name := fmt.Sprintf("cm-%d", i)
		i++
		if _, err := s.Create(ctx, keys.Object("ns", name), configMap(name)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCurrentRevision is 16 concurrent consistent reads asking for
// etcd's revision, as 16 clients getting objects from the cache do.
func BenchmarkCurrentRevision(b *testing.B) {
	s, _ := benchStore(b)
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.CurrentRevision(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkGuaranteedUpdateFrom is an update starting from a cached
// state, as the watch cache starts every update, with the object's data
// changed each time.
func BenchmarkGuaranteedUpdateFrom(b *testing.B) {
	s, keys := benchStore(b)
	ctx := context.Background()
	key := keys.Object("ns", "a")
	cached, err := s.Create(ctx, key, configMap("a"))
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		cached, err = s.GuaranteedUpdateFrom(ctx, key, nil, func(existing runtime.Object) (runtime.Object, error) {
			existing.(*corev1.ConfigMap).Data["key"] = fmt.Sprint(i)
			return existing, nil
		}, cached)
		if err != nil {
			b.Fatal(err)
		}
	}
}
