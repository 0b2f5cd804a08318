// Package webhook calls the admission webhooks of
// admissionregistration.k8s.io/v1 configurations as kube-apiserver does:
// it selects the webhooks that match a write, calls them over HTTPS with
// an AdmissionReview, and turns their answers into the mutated object,
// warnings, audit annotations or a refusal with kube's messages.
//
// Where it differs from kube:
//
//   - matchPolicy Equivalent matches as Exact: finding a rule's match
//     through another version of the resource needs the resource's
//     equivalents and a conversion of the object to the version the
//     webhook asked for, which this package has neither of.
//   - The patch.webhook.admission.k8s.io audit annotations, which kube
//     records only at audit level Request, are not made.
//   - A webhook answering outside 2xx is described as kube describes a
//     generic server response; kube's REST client also reads a Status
//     from such an answer's body.
//   - Failing to list the configurations is a plain error, not a status
//     error: the write could not be decided, which is not a refusal.
package webhook
