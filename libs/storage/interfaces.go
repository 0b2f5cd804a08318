package storage

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Creater stores a new object.
type Creater interface {
	// Create writes obj at key and fails with ErrCodeKeyExists when the key
	// is taken. obj's resourceVersion must be empty. The returned object is a
	// new object decoded from what was written, carrying the new
	// resourceVersion; obj is not modified.
	Create(ctx context.Context, key string, obj runtime.Object) (runtime.Object, error)
}

// Getter reads one object.
type Getter interface {
	// Get returns the object at key, or ErrCodeKeyNotFound. See GetOptions
	// for which revision is read.
	Get(ctx context.Context, key string, opts GetOptions) (runtime.Object, error)
}

// Lister reads every object below a prefix.
type Lister interface {
	// List returns the objects whose keys start with prefix (which must end
	// in "/") and match opts.Predicate, in key order.
	List(ctx context.Context, prefix string, opts ListOptions) (*ListResult, error)
}

// Updater changes an existing object.
type Updater interface {
	// GuaranteedUpdate reads the object at key, checks preconditions, hands
	// a copy to tryUpdate and writes its result if the key's mod revision is
	// still the one read; if it moved, it reads again and calls tryUpdate
	// again. An update that carries a resourceVersion (PUT) is a tryUpdate
	// that returns ErrCodeResourceVersionConflicts when the existing
	// object's resourceVersion differs. When tryUpdate's result encodes to
	// the bytes already stored, nothing is written and the existing object is
	// returned with its resourceVersion unchanged. A tryUpdate error is
	// returned as is.
	GuaranteedUpdate(ctx context.Context, key string, preconditions *Preconditions, tryUpdate UpdateFunc) (runtime.Object, error)
}

// Deleter removes an object.
type Deleter interface {
	// Delete removes the object at key if preconditions hold and validate
	// (when not nil) accepts the object as currently stored; both are checked
	// against the revision that is then compare-and-swap deleted, retrying
	// when the object moved in between. It returns the deleted object with
	// resourceVersion set to the revision of the deletion.
	Delete(ctx context.Context, key string, preconditions *Preconditions, validate ValidateDeletionFunc) (runtime.Object, error)
}

// Watcher streams changes.
type Watcher interface {
	// Watch streams the changes of the objects below prefix (which must end
	// in "/") that match opts.Predicate, starting after opts.ResourceVersion.
	// A resourceVersion older than the store still holds ends the stream
	// with one watch.Error event carrying a 410 Expired status. The watch
	// stops when ctx ends or Stop is called.
	Watch(ctx context.Context, prefix string, opts WatchOptions) (watch.Interface, error)
}

// Interface is everything a storage service does with one resource's objects.
type Interface interface {
	Creater
	Getter
	Lister
	Updater
	Deleter
	Watcher
}

// UpdateFunc computes the new state of an object from a private copy of the
// stored one. It may change and return existing.
type UpdateFunc func(existing runtime.Object) (runtime.Object, error)

// ValidateDeletionFunc vets the stored object right before it is deleted.
type ValidateDeletionFunc func(ctx context.Context, existing runtime.Object) error

// Preconditions must hold for a write to proceed; a mismatch is
// ErrCodeInvalidObj naming the field, which the REST layer reports as 409
// Conflict like kube-apiserver.
type Preconditions struct {
	UID             *types.UID
	ResourceVersion *string
}

// GetOptions selects which revision Get reads.
type GetOptions struct {
	// ResourceVersion "" reads the latest (a quorum read); "0" accepts any
	// revision, so the watch cache may answer; "N" requires a revision at
	// least N, which fails with ErrCodeTooLargeResourceVersion when the
	// store has not seen N within a short wait.
	ResourceVersion string
	// Shared lets a store answer with the object it keeps rather than a
	// copy, as ListOptions.Shared: the caller only reads it.
	Shared bool
}

// ListOptions carries a list request's Kubernetes semantics.
type ListOptions struct {
	// ResourceVersion and ResourceVersionMatch as in metav1.ListOptions:
	// "" is a consistent read of the latest revision; "0" any revision
	// (served from the watch cache); "N" with NotOlderThan (the default)
	// at least N; "N" with Exact exactly revision N (ErrCodeExpired once
	// compacted).
	ResourceVersion      string
	ResourceVersionMatch metav1.ResourceVersionMatch
	// Limit caps the number of items; 0 means no limit. A limited list
	// that stops early returns a Continue token bound to the list's
	// revision.
	Limit int64
	// Continue resumes a limited list from its token; the token fixes the
	// revision, so ResourceVersion must be empty. A token whose revision
	// was compacted fails with ErrCodeExpired.
	Continue  string
	Predicate SelectionPredicate
	// Shared lets a store answer with the objects it keeps rather than
	// copies of them, as kube-apiserver's watch cache answers its lists:
	// the caller reads the items, and changes at most their top-level
	// fields on copies of the structs. Copying each item was an eighth
	// of core's CPU in a list of 1,000 ConfigMaps.
	Shared bool
}

// ListResult is one page of a list.
type ListResult struct {
	Items []runtime.Object
	// ResourceVersion is the revision the list was read at.
	ResourceVersion int64
	// Continue is empty on the last page.
	Continue string
	// RemainingItemCount is how many more objects follow this page when
	// that is known: only when the predicate is empty, like kube-apiserver.
	RemainingItemCount *int64
}

// WatchOptions carries a watch request's Kubernetes semantics.
type WatchOptions struct {
	// ResourceVersion: "" or "0" start with the current state (synthetic
	// ADDED events for every object, then changes); "N" streams changes
	// after revision N.
	ResourceVersion      string
	ResourceVersionMatch metav1.ResourceVersionMatch
	Predicate            SelectionPredicate
	// AllowBookmarks asks for BOOKMARK events: periodic ones carrying the
	// current revision, and the one that ends the initial events.
	AllowBookmarks bool
	// SendInitialEvents with ResourceVersionMatch NotOlderThan streams the
	// state at a revision at least ResourceVersion as ADDED events, then a
	// BOOKMARK annotated metav1.InitialEventsAnnotationKey="true", then
	// changes. nil keeps the legacy behaviour described at ResourceVersion.
	SendInitialEvents *bool
	// Shared lets a store hand every watch of a change the same object,
	// as kube-apiserver's watch cache does, rather than a copy each: the
	// caller only reads the events' objects. With 200 watches of one
	// ConfigMap, a copy per watch was a sixth of core's CPU.
	Shared bool
}
