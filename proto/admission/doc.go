// Package admission is the contract of the admission service's NATS
// subjects.
//
// Owner: the admission service answers SubjectMutate and SubjectValidate,
// each replica in the queue group QueueGroup. Consumers: the storage
// services (core and crd), which ask once for the whole mutating phase of
// a write and once for its whole validating phase, in kube's order:
// mutating admission, the resource's own validation, validating
// admission, then storage. A write retried after a conflict is admitted
// again.
//
// The payload of both subjects is a Review: the attributes of the write
// as kube's AdmissionRequest (admission.k8s.io/v1) carries them, so that a
// webhook receives them unchanged. The reply is a Verdict. An error reply
// (the service could not decide) carries HeaderError; a storage service
// fails the write closed with 503 then.
package admission
