package kinds

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/storage"
)

// Stores makes events.k8s.io/v1 events share core/v1 events' storage (one
// etcd key space, one watch cache), converting per request; every other
// resource gets base's store.
func Stores(base server.StoreFunc) server.StoreFunc {
	var (
		// mu guards shared and keys: the server may build stores from
		// several Replace calls.
		mu     sync.Mutex
		shared *sharedStore
		keys   storage.Keys
	)
	return func(r *resource.Resource) (storage.Interface, storage.Keys, error) {
		gvr := r.GroupVersionResource
		if gvr != CoreEvents && gvr != Events {
			return base(r)
		}
		mu.Lock()
		defer mu.Unlock()
		if shared == nil || shared.finished() {
			core := r
			if gvr != CoreEvents {
				var err error
				if core, err = coreEventsStorage(); err != nil {
					return nil, storage.Keys{}, err
				}
			}
			store, k, err := base(core)
			if err != nil {
				return nil, storage.Keys{}, err
			}
			shared, keys = &sharedStore{Interface: store}, k
		}
		if gvr == Events {
			return &eventsStore{core: shared}, keys, nil
		}
		return shared, keys, nil
	}
}

// coreEventsStorage is what a StoreFunc reads of the core/v1 events
// resource, for when events.k8s.io asks for the shared store first.
func coreEventsStorage() (*resource.Resource, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Event")
	objs, err := objects.NewTyped(scheme, gvk, "EventList")
	if err != nil {
		return nil, fmt.Errorf("declare core events for their store: %w", err)
	}
	return &resource.Resource{GroupVersionResource: CoreEvents, Kind: "Event", Singular: "event", Namespaced: true, Objects: objs}, nil
}

// runner is a store that must run to serve, such as a watch cache.
type runner interface {
	Run(ctx context.Context)
}

// sharedStore is one store served under two resources. The server runs
// each resource's store, but a watch cache runs once: the first Run starts
// it, the last one to end stops it and waits for it. A store that has
// stopped cannot run again, so Stores then builds a new one.
type sharedStore struct {
	storage.Interface

	// mu guards refs, cancel, done and stopped.
	mu      sync.Mutex
	refs    int
	cancel  context.CancelFunc
	done    chan struct{}
	stopped bool
}

// Run runs the store beneath, if it runs, until ctx and every other Run's
// ctx have ended.
func (s *sharedStore) Run(ctx context.Context) {
	r, ok := s.Interface.(runner)
	if !ok {
		return
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	if s.refs == 0 {
		// The store's run outlives this caller's ctx when another
		// resource still runs it.
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.cancel, s.done = cancel, make(chan struct{})
		done := s.done
		go func() {
			defer close(done)
			r.Run(runCtx)
		}()
	}
	s.refs++
	s.mu.Unlock()

	<-ctx.Done()

	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	done := s.done
	if last {
		s.cancel()
		s.stopped = true
	}
	s.mu.Unlock()
	if last {
		<-done
	}
}

// finished reports whether the store ran and stopped.
func (s *sharedStore) finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}
