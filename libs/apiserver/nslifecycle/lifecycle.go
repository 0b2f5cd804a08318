package nslifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/storage"
)

// Immortal are the namespaces that may not be deleted, as kube's
// NamespaceLifecycle defaults.
var Immortal = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic}

var namespaceKind = corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind()

// Lifecycle is kube's NamespaceLifecycle admission: objects are created
// and updated only in namespaces that exist, not created in namespaces
// being terminated, and the immortal namespaces are never deleted.
//
// It reads namespaces from a store: first accepting any revision (a
// watch cache answers), then, when that finds the namespace missing or
// terminating, with a consistent read of etcd, so a namespace created
// or recreated through another replica is seen at once, as kube's
// plugin looks the namespace up live when its informer misses it.
//
// Like kube's plugin, it also remembers the namespaces deleted through it
// for a while and looks those up live: the watch cache may not yet show
// a namespace this replica just marked terminating, and content created
// into it right after the delete would outlive the namespace's emptying.
type Lifecycle struct {
	namespaces storage.Getter
	keys       storage.Keys
	immortal   map[string]bool
	clock      clock.PassiveClock

	// mu guards deleted: namespace name -> when its live lookups end.
	mu      sync.Mutex
	deleted map[string]time.Time
}

// forceLiveLookupTTL is how long after a namespace's deletion its
// lookups skip the cache, kube's value.
const forceLiveLookupTTL = 30 * time.Second

var _ rest.MutatingAdmission = (*Lifecycle)(nil)

// New returns the admission reading namespaces from store under
// keys; immortal names the namespaces that may not be deleted (Immortal
// in kube's configuration).
func New(store storage.Getter, keys storage.Keys, immortal ...string) *Lifecycle {
	l := &Lifecycle{namespaces: store, keys: keys, immortal: map[string]bool{}, clock: clock.RealClock{}, deleted: map[string]time.Time{}}
	for _, n := range immortal {
		l.immortal[n] = true
	}
	return l
}

// Handles reports that Lifecycle looks at creates, updates and deletes.
func (l *Lifecycle) Handles(op rest.Operation) bool {
	return op == rest.Create || op == rest.Update || op == rest.Delete
}

// Admit refuses what the namespace's lifecycle forbids. It runs with the
// mutating plugins, as kube's, so its verdict comes before validation's.
func (l *Lifecycle) Admit(ctx context.Context, a *rest.Attributes) error {
	isNamespace := a.Kind.GroupKind() == namespaceKind
	if isNamespace {
		if a.Operation == rest.Delete {
			if l.immortal[a.Name] {
				return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf("this namespace may not be deleted"))
			}
			l.forceLiveLookup(a.Name)
		}
		return nil
	}
	if a.Namespace == "" || a.Operation == rest.Delete {
		return nil
	}
	rv := "0"
	if l.recentlyDeleted(a.Namespace) {
		rv = ""
	}
	ns, err := l.get(ctx, a.Namespace, rv)
	if rv == "0" && (apierrors.IsNotFound(err) || (err == nil && ns.Status.Phase == corev1.NamespaceTerminating)) {
		// The cache may lag: a namespace created, or deleted and
		// recreated, through another replica. Ask etcd.
		ns, err = l.get(ctx, a.Namespace, "")
	}
	if err != nil {
		return err
	}
	if a.Operation == rest.Create && ns.Status.Phase == corev1.NamespaceTerminating {
		return terminating(a)
	}
	return nil
}

// forceLiveLookup makes lookups of namespace name skip the cache for a
// while.
func (l *Lifecycle) forceLiveLookup(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for n, until := range l.deleted {
		if now.After(until) {
			delete(l.deleted, n)
		}
	}
	l.deleted[name] = now.Add(forceLiveLookupTTL)
}

func (l *Lifecycle) recentlyDeleted(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	until, ok := l.deleted[name]
	return ok && !l.clock.Now().After(until)
}

// get reads namespace name at resourceVersion ("0": any revision, "":
// the latest).
func (l *Lifecycle) get(ctx context.Context, name, resourceVersion string) (*corev1.Namespace, error) {
	// Only read: the cache's own object will do.
	obj, err := l.namespaces.Get(ctx, l.keys.Object("", name), storage.GetOptions{ResourceVersion: resourceVersion, Shared: true})
	if storage.IsNotFound(err) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("read namespace %q: %w", name, err))
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("read namespace %q: got %T", name, obj))
	}
	return ns, nil
}

// terminating is kube's refusal of new content in a namespace being
// terminated.
func terminating(a *rest.Attributes) error {
	err := apierrors.NewForbidden(a.Resource.GroupResource(), objectName(a), fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", a.Namespace),
		Field:   "metadata.namespace",
	})
	return err
}

// objectName names the object of a refused create as kube's admission
// errors do: its name, else its generateName, else "Unknown".
func objectName(a *rest.Attributes) string {
	if a.Name != "" {
		return a.Name
	}
	if m, err := meta.Accessor(a.Object); err == nil {
		if m.GetName() != "" {
			return m.GetName()
		}
		if m.GetGenerateName() != "" {
			return m.GetGenerateName()
		}
	}
	return "Unknown"
}
