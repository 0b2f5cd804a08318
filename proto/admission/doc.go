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
//
// A replica that has not yet read the admission configuration cannot
// know what would match a write, so it decides nothing and answers
// Unsynced; the requester asks again a few times, then fails the write
// closed with 503. The writes a storage service makes of itself at start,
// before any replica could have read the configuration through the
// gateway, are the exception: a replica admits them unasked.
package admission
