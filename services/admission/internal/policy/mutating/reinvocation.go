package mutating

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Reinvocation carries what kube's reinvocation context carries for
// mutating admission policies from the first pass of a write's mutating
// phase to the second. Make one per write with NewReinvocation; it is
// not safe for concurrent use.
type Reinvocation struct {
	passes int
	// changed is whether a policy changed the object in the last pass.
	changed bool
	// lastOutput is the object as the last pass left it.
	lastOutput *unstructured.Unstructured
	// invoked are the IfNeeded invocations that ran since the object
	// last changed; reinvoke those to run again in the second pass.
	invoked, reinvoke sets.Set[invocationKey]
}

// NewReinvocation starts the record of one write.
func NewReinvocation() *Reinvocation {
	return &Reinvocation{invoked: sets.New[invocationKey](), reinvoke: sets.New[invocationKey]()}
}

// Changed reports whether a policy changed the object in the pass just
// run. In kube-apiserver that makes the whole mutating phase (policies,
// then webhooks) run a second time.
func (r *Reinvocation) Changed() bool { return r.changed }

// requireReinvocation marks the IfNeeded invocations that ran so far to
// run again in the second pass: the object changed after them.
func (r *Reinvocation) requireReinvocation() {
	r.reinvoke = r.reinvoke.Union(r.invoked)
	r.invoked = sets.New[invocationKey]()
}

// invocationKey names one invocation across passes, as kube's key does.
type invocationKey struct {
	policy, binding string
	param           types.NamespacedName
}
