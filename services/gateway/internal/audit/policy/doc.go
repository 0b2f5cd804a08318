// Package policy reads a kube audit policy (audit.k8s.io/v1 Policy, the
// file of kube-apiserver's --audit-policy-file) and decides, for each
// request, at which level it is audited, which stages are left out and
// whether managedFields are dropped from the recorded objects. The rules
// match as kube-apiserver's k8s.io/apiserver/pkg/audit/policy does: the
// first rule that matches wins, and a request no rule matches is not
// audited.
package policy
