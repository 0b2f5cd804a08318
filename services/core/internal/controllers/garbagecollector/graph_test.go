package garbagecollector

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// recorder records what the graph asks for.
type recorder struct{ deletes, orphans []types.UID }

func (r *recorder) attemptToDelete(uid types.UID) { r.deletes = append(r.deletes, uid) }
func (r *recorder) attemptToOrphan(uid types.UID) { r.orphans = append(r.orphans, uid) }

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func cm(uid types.UID, ns string, owners ...metav1.OwnerReference) *node {
	return &node{uid: uid, resource: configMaps, kind: "ConfigMap", namespace: ns, name: string(uid), owners: owners}
}

func ref(uid types.UID, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: string(uid), UID: uid, BlockOwnerDeletion: &block}
}

func TestGraph(t *testing.T) {
	for _, c := range []struct {
		name                 string
		before               []*node
		observe              *node
		forget               types.UID
		wantDelete, wantOrph []types.UID
	}{
		{
			name:       "dependent of an unseen owner is looked at",
			observe:    cm("dep", "ns", ref("owner", false)),
			wantDelete: []types.UID{"dep"},
		},
		{
			name:    "dependent of a seen owner waits for the owner's deletion",
			before:  []*node{cm("owner", "ns")},
			observe: cm("dep", "ns", ref("owner", false)),
		},
		{
			name:       "owner in another namespace is not the owner",
			before:     []*node{cm("owner", "other")},
			observe:    cm("dep", "ns", ref("owner", false)),
			wantDelete: []types.UID{"dep"},
		},
		{
			name:       "deleted owner's dependents are looked at",
			before:     []*node{cm("owner", "ns"), cm("dep", "ns", ref("owner", false))},
			forget:     "owner",
			wantDelete: []types.UID{"dep"},
		},
		{
			name:       "foreground owner and its dependents are looked at",
			before:     []*node{cm("owner", "ns"), cm("dep", "ns", ref("owner", true))},
			observe:    &node{uid: "owner", resource: configMaps, kind: "ConfigMap", namespace: "ns", name: "owner", beingDeleted: true, deletingDependents: true},
			wantDelete: []types.UID{"owner", "dep"},
		},
		{
			name:     "orphaning owner is orphaned",
			before:   []*node{cm("owner", "ns"), cm("dep", "ns", ref("owner", false))},
			observe:  &node{uid: "owner", resource: configMaps, kind: "ConfigMap", namespace: "ns", name: "owner", beingDeleted: true, orphaning: true},
			wantOrph: []types.UID{"owner"},
		},
		{
			name: "foreground owner is looked at when its blocker goes",
			before: []*node{
				{uid: "owner", resource: configMaps, kind: "ConfigMap", namespace: "ns", name: "owner", beingDeleted: true, deletingDependents: true},
				cm("dep", "ns", ref("owner", true)),
			},
			forget:     "dep",
			wantDelete: []types.UID{"owner"},
		},
		{
			name: "foreground owner is looked at when its blocker stops blocking",
			before: []*node{
				{uid: "owner", resource: configMaps, kind: "ConfigMap", namespace: "ns", name: "owner", beingDeleted: true, deletingDependents: true},
				cm("dep", "ns", ref("owner", true)),
			},
			observe:    cm("dep", "ns", ref("owner", false)),
			wantDelete: []types.UID{"owner"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			g := newGraph(r)
			for _, n := range c.before {
				g.observe(n)
			}
			*r = recorder{}
			if c.observe != nil {
				g.observe(c.observe)
			}
			if c.forget != "" {
				g.forget(c.forget)
			}
			slices.Sort(r.deletes)
			slices.Sort(c.wantDelete)
			if !slices.Equal(r.deletes, c.wantDelete) || !slices.Equal(r.orphans, c.wantOrph) {
				t.Errorf("asked to delete %v and orphan %v, want %v and %v", r.deletes, r.orphans, c.wantDelete, c.wantOrph)
			}
		})
	}
}
