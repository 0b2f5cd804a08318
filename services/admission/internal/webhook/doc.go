// Package webhook calls the admission webhooks of
// admissionregistration.k8s.io/v1 configurations as kube-apiserver does:
// it selects the webhooks that match a write, calls them over HTTPS with
// an AdmissionReview, and turns their answers into the mutated object,
// warnings, audit annotations or a refusal with kube's messages.
package webhook
