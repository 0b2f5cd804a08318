package cachertest

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage/cacher"
)

// Run builds a cacher over store and runs it until the test ends.
func Run(t testing.TB, store cacher.Store, newObj func() runtime.Object, prefix string, opts ...cacher.Option) *cacher.Cacher {
	t.Helper()
	c, err := cacher.New(store, newObj, prefix, opts...)
	if err != nil {
		t.Fatalf("new cacher: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}
