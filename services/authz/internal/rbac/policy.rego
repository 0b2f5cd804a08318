# Kubernetes RBAC authorization (plugin/pkg/auth/authorizer/rbac) in Rego.
#
# input: the request attributes (user, groups, verb, apiGroup, resource,
# subresource, namespace, name, resourceRequest, path) and grants: the
# bindings whose subjects may name the request's user or groups, in kube's
# visiting order (ClusterRoleBindings, then the RoleBindings of the request's
# namespace), each with the rules of the role it refers to, or the error of
# resolving that role. The caller's index only narrows the bindings; every
# semantic check is made here.
package kplane.rbac

result := {"allowed": allowed, "reason": reason, "everyName": every_name}

default allowed := false

allowed if count(allowing) > 0

reason := allow_reason if allowed

reason := deny_reason if not allowed

# Indexes of the grants that allow the request; the first one names the
# reason, as kube's visitor stops at the first rule that allows.
allowing contains i if {
	some i, g in input.grants
	in_scope(g)
	applies(g)
	some r in g.rules
	rule_allows(r)
}

allow_reason := sprintf("RBAC: allowed by %s %q of %s %q to %s", [g.kind, binding_name(g), g.roleKind, g.roleName, describe_subject(g, g.subjects[first_subject(g)])]) if {
	g := input.grants[min(allowing)]
}

# A RoleBinding grants only within its own namespace.
in_scope(g) if g.kind == "ClusterRoleBinding"

in_scope(g) if {
	g.kind == "RoleBinding"
	input.namespace != ""
	g.namespace == input.namespace
}

applies(g) if {
	some s in g.subjects
	subject_applies(g, s)
}

first_subject(g) := min({j | some j, s in g.subjects; subject_applies(g, s)})

subject_applies(_, s) if {
	s.kind == "User"
	s.name == input.user
}

subject_applies(_, s) if {
	s.kind == "Group"
	s.name in input.groups
}

# A ServiceAccount subject without a namespace means the binding's own
# namespace; a ClusterRoleBinding has none, so such a subject never applies.
subject_applies(g, s) if {
	s.kind == "ServiceAccount"
	ns := subject_namespace(g, s)
	ns != ""
	input.user == concat("", ["system:serviceaccount:", ns, ":", s.name])
}

subject_namespace(_, s) := s.namespace if s.namespace != ""

subject_namespace(g, s) := g.namespace if s.namespace == ""

binding_name(g) := g.name if g.kind == "ClusterRoleBinding"

binding_name(g) := concat("/", [g.name, g.namespace]) if g.kind == "RoleBinding"

describe_subject(g, s) := sprintf("%s %q", [s.kind, concat("/", [s.name, subject_namespace(g, s)])]) if s.kind == "ServiceAccount"

describe_subject(_, s) := sprintf("%s %q", [s.kind, s.name]) if s.kind != "ServiceAccount"

# Whether the decision and its reason hold for every name of the resource:
# no rule of the grants that apply lists resourceNames for the request's
# verb and resource. The gateway then keeps one decision for all names
# instead of asking again for each object.
default every_name := false

every_name if {
	input.resourceRequest
	not names_matter
}

names_matter if {
	some g in input.grants
	in_scope(g)
	applies(g)
	some r in g.rules
	count(r.resourceNames) > 0
	verb_matches(r)
	api_group_matches(r)
	resource_matches(r)
}

rule_allows(r) if {
	input.resourceRequest
	verb_matches(r)
	api_group_matches(r)
	resource_matches(r)
	resource_name_matches(r)
}

rule_allows(r) if {
	not input.resourceRequest
	verb_matches(r)
	non_resource_url_matches(r)
}

verb_matches(r) if "*" in r.verbs

verb_matches(r) if input.verb in r.verbs

api_group_matches(r) if "*" in r.apiGroups

api_group_matches(r) if input.apiGroup in r.apiGroups

combined_resource := concat("/", [input.resource, input.subresource]) if input.subresource != ""

combined_resource := input.resource if input.subresource == ""

resource_matches(r) if "*" in r.resources

resource_matches(r) if combined_resource in r.resources

# "*/<subresource>" matches that subresource of every resource.
resource_matches(r) if {
	input.subresource != ""
	concat("", ["*/", input.subresource]) in r.resources
}

# A rule with resourceNames matches only requests that carry one of them: a
# request without a name (list, watch, create, deletecollection) never does.
resource_name_matches(r) if count(r.resourceNames) == 0

resource_name_matches(r) if input.name in r.resourceNames

non_resource_url_matches(r) if "*" in r.nonResourceURLs

non_resource_url_matches(r) if input.path in r.nonResourceURLs

non_resource_url_matches(r) if {
	some u in r.nonResourceURLs
	endswith(u, "*")
	startswith(input.path, trim_right(u, "*"))
}

# Resolution errors of the bindings that apply, in visiting order and
# without repeats, formatted as kube's utilerrors aggregate.
errors := [g.error |
	some g in input.grants
	g.error != ""
	in_scope(g)
	applies(g)
]

unique_errors := [e | some i, e in errors; not e in array.slice(errors, 0, i)]

deny_reason := "" if count(unique_errors) == 0

deny_reason := concat("", ["RBAC: ", unique_errors[0]]) if count(unique_errors) == 1

deny_reason := sprintf("RBAC: [%s]", [concat(", ", unique_errors)]) if count(unique_errors) > 1
