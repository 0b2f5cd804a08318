package admission

import (
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/proto/rpc"
)

// QueueGroup is the queue group every admission replica subscribes in.
const QueueGroup = "kplane-admission"

// IdleFor is how long a requester may rely on an Idle verdict. It bounds
// how late a new webhook or policy sees the writes of a resource nothing
// named before, on top of the admission replicas' own informer delay.
const IdleFor = 500 * time.Millisecond

// Subjects of admission.
const (
	// SubjectMutate runs every mutating step that matches a write (the
	// mutating webhooks in order, with reinvocation, and the mutating
	// policies) and replies with the object they leave.
	SubjectMutate = "kplane.admission.mutate"
	// SubjectValidate runs every validating step that matches a write
	// (validating webhooks, ValidatingAdmissionPolicies, operator
	// policies) on the object the storage service is about to store.
	SubjectValidate = "kplane.admission.validate"
)

// HeaderError marks an error reply (proto/rpc).
const HeaderError = rpc.HeaderError

// Review is one write to admit.
type Review struct {
	// Request is the write as a webhook sees it: uid, kind, resource and
	// subresource as requested and as stored, name, namespace,
	// operation, user, object, old object, options and dryRun.
	Request admissionv1.AdmissionRequest `json:"request"`
	// Equivalents are the other resources the written objects are
	// served as (kube's equivalent resources: every served version of a
	// custom resource, events in core/v1 and in events.k8s.io/v1), with
	// the kind each takes for the request's subresource. A webhook or
	// policy with matchPolicy Equivalent whose rules name one of them
	// sees the write converted to it. Empty when there are none.
	Equivalents []Equivalent `json:"equivalents,omitempty"`
	// Definition is, for a custom resource with Equivalents, its
	// CustomResourceDefinition cut to what converting between its
	// versions takes (name, uid, generation, group, names, scope, the
	// versions' names and subresources, conversion), so that admission
	// converts as the crd service does. Nil for built-in resources, whose
	// conversions admission knows.
	Definition *apiextensionsv1.CustomResourceDefinition `json:"definition,omitempty"`
}

// Equivalent is one resource equivalent to a write's.
type Equivalent struct {
	Resource metav1.GroupVersionResource `json:"resource"`
	Kind     metav1.GroupVersionKind     `json:"kind"`
}

// Verdict is admission's answer for one phase of one write.
type Verdict struct {
	// Allowed is false when a step refused the write; Status is then the
	// refusal, as the client receives it.
	Allowed bool           `json:"allowed"`
	Status  *metav1.Status `json:"status,omitempty"`
	// Object is the object the mutating steps left, when they changed
	// it; empty otherwise and for validation.
	Object runtime.RawExtension `json:"object,omitempty"`
	// Warnings are shown to the client (Warning headers).
	Warnings []string `json:"warnings,omitempty"`
	// AuditAnnotations are added to the write's audit event.
	AuditAnnotations map[string]string `json:"auditAnnotations,omitempty"`
	// Idle says no step of the phase could act on any write of the same
	// resource, subresource and operation, whatever its object: nothing
	// configured names them. The requester may let such writes through
	// the phase unasked for IdleFor.
	Idle bool `json:"idle,omitempty"`
	// Unsynced says the replica has not yet read its configuration and
	// decided nothing: the requester asks again, so that another replica
	// may answer.
	Unsynced bool `json:"unsynced,omitempty"`
}
