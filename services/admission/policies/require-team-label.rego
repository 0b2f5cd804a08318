# Refuse a namespace without a team label, and warn about one whose team
# label is being changed. Load it with the admission service's policy
# directory, or put it in a ConfigMap of the policy namespace labelled
# kplane.dev/admission-policy=true.
package kplane.admission.requireteamlabel

deny contains sprintf("namespace %q has no team label", [input.name]) if {
	input.operation in {"CREATE", "UPDATE"}
	input.resource.group == ""
	input.resource.resource == "namespaces"
	not input.subResource
	not input.object.metadata.labels.team
}

warn contains sprintf("namespace %q moves from team %q to %q", [input.name, old, new]) if {
	input.operation == "UPDATE"
	input.resource.resource == "namespaces"
	old := input.oldObject.metadata.labels.team
	new := input.object.metadata.labels.team
	old != new
}
