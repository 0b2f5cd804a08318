package kinds

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/apiserver/eventconv"
	"kplane.dev/libs/storage"
)

// eventsStore serves events.k8s.io/v1 Events from the store of core/v1
// Events: objects going in are converted to core Events, objects coming
// out (results, list items, watch events, bookmarks, the objects handed
// to update and delete callbacks) to events.k8s.io ones, and predicates
// see events.k8s.io objects.
type eventsStore struct {
	core *sharedStore
}

var _ storage.Interface = (*eventsStore)(nil)

// Run runs the shared core store, if it runs.
func (s *eventsStore) Run(ctx context.Context) { s.core.Run(ctx) }

func (s *eventsStore) Create(ctx context.Context, key string, obj runtime.Object) (runtime.Object, error) {
	in, err := toCore(obj)
	if err != nil {
		return nil, err
	}
	out, err := s.core.Create(ctx, key, in)
	if err != nil {
		return nil, err
	}
	return fromCore(out)
}

func (s *eventsStore) Get(ctx context.Context, key string, opts storage.GetOptions) (runtime.Object, error) {
	out, err := s.core.Get(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return fromCore(out)
}

func (s *eventsStore) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	opts.Predicate = corePredicate(opts.Predicate)
	res, err := s.core.List(ctx, prefix, opts)
	if err != nil {
		return nil, err
	}
	converted := *res
	converted.Items = make([]runtime.Object, len(res.Items))
	for i, item := range res.Items {
		if converted.Items[i], err = fromCore(item); err != nil {
			return nil, err
		}
	}
	return &converted, nil
}

func (s *eventsStore) GuaranteedUpdate(ctx context.Context, key string, preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error) {
	out, err := s.core.GuaranteedUpdate(ctx, key, preconditions, func(existing runtime.Object) (runtime.Object, error) {
		ev, err := fromCore(existing)
		if err != nil {
			return nil, err
		}
		updated, err := tryUpdate(ev)
		if err != nil {
			return nil, err
		}
		return toCore(updated)
	})
	if err != nil {
		return nil, err
	}
	return fromCore(out)
}

func (s *eventsStore) Delete(ctx context.Context, key string, preconditions *storage.Preconditions, validate storage.ValidateDeletionFunc) (runtime.Object, error) {
	var coreValidate storage.ValidateDeletionFunc
	if validate != nil {
		coreValidate = func(ctx context.Context, existing runtime.Object) error {
			ev, err := fromCore(existing)
			if err != nil {
				return err
			}
			return validate(ctx, ev)
		}
	}
	out, err := s.core.Delete(ctx, key, preconditions, coreValidate)
	if err != nil {
		return nil, err
	}
	return fromCore(out)
}

func (s *eventsStore) Watch(ctx context.Context, prefix string, opts storage.WatchOptions) (watch.Interface, error) {
	opts.Predicate = corePredicate(opts.Predicate)
	w, err := s.core.Watch(ctx, prefix, opts)
	if err != nil {
		return nil, err
	}
	return newConvertingWatch(w), nil
}

// corePredicate evaluates p, written for events.k8s.io objects, on the
// core Events the store holds.
func corePredicate(p storage.SelectionPredicate) storage.SelectionPredicate {
	attrs := p.GetAttrs
	if attrs == nil {
		return p
	}
	p.GetAttrs = func(obj runtime.Object) (labels.Set, fields.Set, error) {
		ev, err := fromCore(obj)
		if err != nil {
			return nil, nil, err
		}
		return attrs(ev)
	}
	return p
}

func toCore(obj runtime.Object) (*corev1.Event, error) {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("store events.k8s.io event: got %T, want *v1.Event of events.k8s.io", obj)
	}
	return eventconv.ToCore(ev), nil
}

func fromCore(obj runtime.Object) (*eventsv1.Event, error) {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("read events.k8s.io event: stored object is %T, want *v1.Event of core", obj)
	}
	return eventconv.FromCore(ev), nil
}

// convertingWatch hands on a core events watch's events with their
// objects converted to events.k8s.io; other objects (the Status of an
// error event) pass as they are. Its goroutine ends when the watch beneath
// closes or Stop is called, and Stop waits for it.
type convertingWatch struct {
	in       watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func newConvertingWatch(in watch.Interface) *convertingWatch {
	w := &convertingWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *convertingWatch) run() {
	defer close(w.done)
	defer close(w.out)
	for {
		var e watch.Event
		var ok bool
		select {
		case e, ok = <-w.in.ResultChan():
			if !ok {
				return
			}
		case <-w.stop:
			return
		}
		if ev, isEvent := e.Object.(*corev1.Event); isEvent {
			e.Object = eventconv.FromCore(ev)
		}
		select {
		case w.out <- e:
		case <-w.stop:
			return
		}
	}
}

func (w *convertingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *convertingWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
	<-w.done
}
