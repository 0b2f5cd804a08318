package garbagecollector

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// node is what the graph knows of one observed object. A node is never
// changed once in the graph; an update replaces it, so workers read nodes
// without holding the graph's lock.
type node struct {
	uid       types.UID
	resource  schema.GroupVersionResource
	kind      string
	namespace string
	name      string
	owners    []metav1.OwnerReference
	// beingDeleted: the object has a deletionTimestamp.
	beingDeleted bool
	// deletingDependents: being deleted in the foreground.
	deletingDependents bool
	// orphaning: being deleted with its dependents orphaned.
	orphaning bool
}

func newNode(gvr schema.GroupVersionResource, kind string, m metav1.Object) *node {
	deleting := m.GetDeletionTimestamp() != nil
	return &node{
		uid:                m.GetUID(),
		resource:           gvr,
		kind:               kind,
		namespace:          m.GetNamespace(),
		name:               m.GetName(),
		owners:             m.GetOwnerReferences(),
		beingDeleted:       deleting,
		deletingDependents: deleting && slices.Contains(m.GetFinalizers(), metav1.FinalizerDeleteDependents),
		orphaning:          deleting && slices.Contains(m.GetFinalizers(), metav1.FinalizerOrphanDependents),
	}
}

// ownerRef returns n's reference to owner, if it has one.
func (n *node) ownerRef(owner types.UID) (metav1.OwnerReference, bool) {
	for _, ref := range n.owners {
		if ref.UID == owner {
			return ref, true
		}
	}
	return metav1.OwnerReference{}, false
}

// blocks reports whether n blocks the foreground deletion of owner.
func (n *node) blocks(owner types.UID) bool {
	ref, ok := n.ownerRef(owner)
	return ok && isBlocking(ref)
}

func isBlocking(ref metav1.OwnerReference) bool {
	return ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion
}

// queues receive the work the graph's changes call for.
type queues interface {
	// attemptToDelete asks to decide the fate of an object: delete it,
	// strip dangling references, or finish its foreground deletion.
	attemptToDelete(types.UID)
	// attemptToOrphan asks to orphan an object's dependents.
	attemptToOrphan(types.UID)
}

// graph holds the owner -> dependents relation by UID. Dependents are
// indexed by the owner UIDs their references name, whether or not that
// owner was ever observed, so that an owner's deletion reaches them.
type graph struct {
	q queues

	mu         sync.Mutex
	nodes      map[types.UID]*node
	dependents map[types.UID]map[types.UID]struct{}
}

func newGraph(q queues) *graph {
	return &graph{q: q, nodes: map[types.UID]*node{}, dependents: map[types.UID]map[types.UID]struct{}{}}
}

// node returns the graph's view of uid, nil when it holds none.
func (g *graph) node(uid types.UID) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[uid]
}

// dependentsOf returns the observed objects that reference owner.
func (g *graph) dependentsOf(owner types.UID) []*node {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*node
	for uid := range g.dependents[owner] {
		if n, ok := g.nodes[uid]; ok {
			out = append(out, n)
		}
	}
	return out
}

// observe records the current state of an object and asks for the work
// its change calls for, as kube's graph builder does for add and update
// events. Since old is whatever the graph held before (nil after a
// restart), a rebuilt graph asks again for all unfinished work.
func (g *graph) observe(n *node) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.nodes[n.uid]
	g.nodes[n.uid] = n
	var oldOwners []metav1.OwnerReference
	if old != nil {
		oldOwners = old.owners
	}
	added, removed, unblocked := diffOwners(oldOwners, n.owners)
	for _, ref := range removed {
		g.unindex(ref.UID, n.uid)
	}
	for _, ref := range added {
		set, ok := g.dependents[ref.UID]
		if !ok {
			set = map[types.UID]struct{}{}
			g.dependents[ref.UID] = set
		}
		set[n.uid] = struct{}{}
	}
	// An owner waiting for its blocking dependents may be free to go.
	for _, uid := range unblocked {
		if owner, ok := g.nodes[uid]; ok && owner.deletingDependents {
			g.q.attemptToDelete(uid)
		}
	}
	// A reference to an owner the graph does not hold, or holds under
	// other coordinates, or that is being deleted, needs a live look.
	for _, ref := range added {
		if owner, ok := g.nodes[ref.UID]; !ok || owner.beingDeleted || !owner.matches(ref, n.namespace) {
			g.q.attemptToDelete(n.uid)
			break
		}
	}
	switch {
	case n.orphaning && (old == nil || !old.orphaning):
		g.q.attemptToOrphan(n.uid)
	case n.deletingDependents && (old == nil || !old.deletingDependents):
		g.q.attemptToDelete(n.uid)
		for uid := range g.dependents[n.uid] {
			g.q.attemptToDelete(uid)
		}
	}
}

// forget removes a deleted object and asks to reconsider its dependents,
// which may have lost their last owner, and its owners deleting their
// dependents in the foreground, which may have lost their last blocker.
func (g *graph) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.nodes[uid]
	if !ok {
		return
	}
	delete(g.nodes, uid)
	for _, ref := range n.owners {
		g.unindex(ref.UID, uid)
		if owner, ok := g.nodes[ref.UID]; ok && owner.deletingDependents {
			g.q.attemptToDelete(ref.UID)
		}
	}
	for dep := range g.dependents[uid] {
		g.q.attemptToDelete(dep)
	}
}

func (g *graph) unindex(owner, dependent types.UID) {
	set := g.dependents[owner]
	delete(set, dependent)
	if len(set) == 0 {
		delete(g.dependents, owner)
	}
}

// matches reports whether ref, made by a dependent in namespace, names the
// object n is: a namespaced owner must share the dependent's namespace.
func (n *node) matches(ref metav1.OwnerReference, namespace string) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != n.resource.Group || ref.Kind != n.kind || ref.Name != n.name {
		return false
	}
	return n.namespace == "" || n.namespace == namespace
}

// diffOwners compares two reference lists by owner UID: the references
// added, those removed, and the owners no longer blocked by this
// dependent (a blocking reference removed or made non-blocking).
func diffOwners(old, cur []metav1.OwnerReference) (added, removed []metav1.OwnerReference, unblocked []types.UID) {
	byUID := make(map[types.UID]metav1.OwnerReference, len(old))
	for _, ref := range old {
		byUID[ref.UID] = ref
	}
	for _, ref := range cur {
		was, ok := byUID[ref.UID]
		if !ok {
			added = append(added, ref)
			continue
		}
		delete(byUID, ref.UID)
		if isBlocking(was) && !isBlocking(ref) {
			unblocked = append(unblocked, ref.UID)
		}
	}
	for _, ref := range old {
		if _, ok := byUID[ref.UID]; ok {
			removed = append(removed, ref)
			if isBlocking(ref) {
				unblocked = append(unblocked, ref.UID)
			}
		}
	}
	return added, removed, unblocked
}
