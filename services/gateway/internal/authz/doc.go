// Package authz decides whether a user may make a request, for the
// gateway's authorization and impersonation filters. Members of
// system:masters are allowed here, as kube's privileged-group authorizer
// allows them, so that components holding such a certificate never depend
// on the authz service; everyone else is reviewed by authz over NATS
// (SubjectAccessReview). Decisions are cached (allowed and denied for
// their own TTLs, bounded in size) and the whole cache is dropped when
// authz announces that its rules changed. Refusals are worded as
// kube-apiserver words them.
package authz
