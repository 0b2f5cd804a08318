# Deny deleting a namespace labelled protected=true, whoever asks and
# whatever RBAC grants. Load it with --authorization-policy-dir, or put it
# in a ConfigMap of the policy namespace labelled
# kplane.dev/authorization-policy=true.
package kplane.authz.protectnamespaces

deny contains sprintf("namespace %q is protected", [input.resourceAttributes.name]) if {
	input.resourceAttributes.verb == "delete"
	input.resourceAttributes.group == ""
	input.resourceAttributes.resource == "namespaces"
	input.resourceAttributes.subresource == ""
	input.namespace.labels.protected == "true"
}
