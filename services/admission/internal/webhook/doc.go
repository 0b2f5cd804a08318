// Package webhook calls the admission webhooks of
// admissionregistration.k8s.io/v1 configurations as kube-apiserver does:
// it selects the webhooks that match a write, calls them over HTTPS with
// an AdmissionReview, and turns their answers into the mutated object,
// warnings, audit annotations or a refusal with kube's messages. A
// webhook with matchPolicy Equivalent whose rules name another version of
// the written resource (review.Attributes.Equivalents) is called with the
// write converted to that version, and a mutating webhook's patch is
// converted back.
//
// Where it differs from kube:
//
//   - A webhook answering outside 2xx is described as kube describes a
//     generic server response; kube's REST client also reads a Status
//     from such an answer's body.
//   - Failing to list the configurations is a plain error, not a status
//     error: the write could not be decided, which is not a refusal.
package webhook
