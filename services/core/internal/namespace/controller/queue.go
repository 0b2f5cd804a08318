package controller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// syncFunc brings one key to its desired state; an error retries it with
// backoff.
type syncFunc func(ctx context.Context, key string) error

// newQueue returns a queue that retries a failed key after base,
// doubling up to limit.
func newQueue(name string, base, limit time.Duration) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, limit),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// run starts factory's informers, waits for them to sync, and works the
// queue with workers goroutines until ctx ends; it then stops the queue,
// the workers and the informers and waits for all of them.
func run(ctx context.Context, log *slog.Logger, factory informers.SharedInformerFactory, queue workqueue.TypedRateLimitingInterface[string], workers int, syncKey syncFunc) error {
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer queue.ShutDown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			log.Error("informer did not sync", "type", typ.String())
		}
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for work(ctx, log, queue, syncKey) {
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	return nil
}

// work syncs one key; it reports false once the queue shuts down.
func work(ctx context.Context, log *slog.Logger, queue workqueue.TypedRateLimitingInterface[string], syncKey syncFunc) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := syncKey(ctx, key); err != nil {
		if ctx.Err() == nil {
			log.Info("sync failed, retrying", "key", key, "err", err)
		}
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// enqueue adds the key of every object an informer reports, deleted
// ones included.
func enqueue(queue workqueue.TypedRateLimitingInterface[string], key func(obj any) (string, bool)) cache.ResourceEventHandler {
	add := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if k, ok := key(obj); ok {
			queue.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: add,
	}
}
