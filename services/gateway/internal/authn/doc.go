// Package authn is the gateway's interim authentication and
// authorization, until the authn and authz services take over: a verified
// client certificate (CN the user, O the groups) or a bearer token from a
// static token file (kube's CSV format) names the user, and only members
// of system:masters are admitted. Failures are answered with
// kube-apiserver's 401 and 403 Status bodies and messages.
package authn
