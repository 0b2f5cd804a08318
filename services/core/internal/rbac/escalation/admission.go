package escalation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/proto/authz"
)

// privilegedGroup is kube's system:masters, whose members may do anything.
const privilegedGroup = "system:masters"

// Requester asks authz a question over NATS and decodes the answer.
type Requester interface {
	RequestJSON(ctx context.Context, subject string, in, out any) error
}

// fullAuthority is what it takes to write an aggregationRule, which can
// gather any rule: everything, as cluster-admin holds.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Admission refuses RBAC writes that grant what the writer does not hold.
type Admission struct {
	rpc Requester
	// kube reads the roles bindings refer to.
	kube kubernetes.Interface
	log  *slog.Logger
}

var _ rest.ValidatingAdmission = (*Admission)(nil)

// New returns the admission, asking authz through rpc and reading roles
// through kube.
func New(rpc Requester, kube kubernetes.Interface, log *slog.Logger) *Admission {
	return &Admission{rpc: rpc, kube: kube, log: log}
}

// Handles creates and updates.
func (*Admission) Handles(op rest.Operation) bool { return op == rest.Create || op == rest.Update }

// Validate checks a write of a role or binding.
func (e *Admission) Validate(ctx context.Context, a *rest.Attributes) error {
	if a.Resource.Group != rbacv1.GroupName || a.Subresource != "" {
		return nil
	}
	switch a.Resource.Resource {
	case "roles", "clusterroles", "rolebindings", "clusterrolebindings":
	default:
		return nil
	}
	if a.User != nil && slices.Contains(a.User.Groups, privilegedGroup) {
		return nil
	}
	if a.Operation == rest.Update && onlyGCFields(a.Object, a.OldObject) {
		// Owner references and finalizers grant nothing; the garbage
		// collector must be able to set them.
		return nil
	}
	gr := a.Resource.GroupResource()
	switch obj := a.Object.(type) {
	case *rbacv1.Role:
		return e.checkRole(ctx, a, obj.Rules, nil)
	case *rbacv1.ClusterRole:
		return e.checkRole(ctx, a, obj.Rules, obj.AggregationRule)
	case *rbacv1.RoleBinding:
		return e.checkBinding(ctx, a, obj.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return e.checkBinding(ctx, a, obj.RoleRef)
	default:
		return apierrors.NewInternalError(fmt.Errorf("%s: unexpected object %T", gr, a.Object))
	}
}

func (e *Admission) checkRole(ctx context.Context, a *rest.Attributes, rules []rbacv1.PolicyRule, aggregation *rbacv1.AggregationRule) error {
	gr := a.Resource.GroupResource()
	// Kube asks with the name the request's URL carries: none on a
	// create, so escalate limited to resourceNames does not cover one.
	name := a.Name
	if a.Operation == rest.Create {
		name = ""
	}
	if e.allowed(ctx, a.User, &authorizationv1.ResourceAttributes{
		Verb: "escalate", Group: a.Resource.Group, Version: "*", Resource: a.Resource.Resource, Name: name, Namespace: a.Namespace,
	}) {
		return nil
	}
	if err := e.confirmNoEscalation(ctx, a.User, a.Namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, a.Name, err)
	}
	if aggregation != nil {
		if err := e.confirmNoEscalation(ctx, a.User, a.Namespace, fullAuthority); err != nil {
			return apierrors.NewForbidden(gr, a.Name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
		}
	}
	return nil
}

func (e *Admission) checkBinding(ctx context.Context, a *rest.Attributes, ref rbacv1.RoleRef) error {
	gr := a.Resource.GroupResource()
	// bind is checked in the binding's namespace (none for a cluster
	// binding), so a ClusterRole can be delegated for some namespaces.
	attrs := &authorizationv1.ResourceAttributes{Verb: "bind", Group: ref.APIGroup, Name: ref.Name, Namespace: a.Namespace}
	switch ref.Kind {
	case "ClusterRole":
		attrs.Resource = "clusterroles"
	case "Role":
		attrs.Resource = "roles"
	default:
		attrs = nil
	}
	if attrs != nil && e.allowed(ctx, a.User, attrs) {
		return nil
	}
	rules, err := e.roleRules(ctx, ref, a.Namespace)
	if err != nil {
		return apierrors.NewForbidden(gr, a.Name, err)
	}
	if err := e.confirmNoEscalation(ctx, a.User, a.Namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, a.Name, err)
	}
	return nil
}

// roleRules are the rules of the role a binding in namespace refers to.
func (e *Admission) roleRules(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		r, err := e.kube.RbacV1().Roles(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	case "ClusterRole":
		r, err := e.kube.RbacV1().ClusterRoles().Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// allowed asks authz whether u may do what attrs say; a failed question
// is no permission, as kube's escalation checks treat an authorizer error.
func (e *Admission) allowed(ctx context.Context, u *authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) bool {
	if u == nil {
		return false
	}
	sar := &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1.SchemeGroupVersion.String(), Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: attrs, User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra(u.Extra),
		},
	}
	var answer authorizationv1.SubjectAccessReview
	if err := e.rpc.RequestJSON(ctx, authz.SubjectAccessReview, sar, &answer); err != nil {
		e.log.Warn("authorize rbac escalation check", "verb", attrs.Verb, "resource", attrs.Resource, "user", u.Username, "err", err)
		return false
	}
	return answer.Status.Allowed
}

// confirmNoEscalation is kube's ConfirmNoEscalation: u must hold every
// rule in namespace ("" for cluster-wide rules). Rules authz could not
// resolve are named in the message, as kube's resolution errors.
func (e *Admission) confirmNoEscalation(ctx context.Context, u *authenticationv1.UserInfo, namespace string, rules []rbacv1.PolicyRule) error {
	if u == nil {
		return errors.New("no user on context")
	}
	var resolution []error
	var status authorizationv1.SubjectRulesReviewStatus
	q := authz.RulesReview{User: u.Username, UID: u.UID, Groups: u.Groups, Extra: plainExtra(u.Extra), Namespace: namespace}
	if err := e.rpc.RequestJSON(ctx, authz.SubjectRulesReview, q, &status); err != nil {
		resolution = append(resolution, err)
	} else if status.EvaluationError != "" {
		resolution = append(resolution, errors.New(status.EvaluationError))
	}
	covered, missing := Covers(ownerRules(status), rules)
	if covered {
		return nil
	}
	descriptions := map[string]bool{}
	for _, r := range compact(missing) {
		descriptions[compactString(r)] = true
	}
	lines := make([]string, 0, len(descriptions))
	for d := range descriptions {
		lines = append(lines, d)
	}
	slices.Sort(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Username, u.Groups, strings.Join(lines, "\n"))
	if len(resolution) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", resolution)
	}
	return errors.New(msg)
}

// ownerRules are the rules of a rules review as policy rules.
func ownerRules(s authorizationv1.SubjectRulesReviewStatus) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(s.ResourceRules)+len(s.NonResourceRules))
	for _, r := range s.ResourceRules {
		out = append(out, rbacv1.PolicyRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	for _, r := range s.NonResourceRules {
		out = append(out, rbacv1.PolicyRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
	}
	return out
}

func extra(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}

func plainExtra(in map[string]authenticationv1.ExtraValue) map[string][]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string][]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// onlyGCFields reports whether an update changes nothing but what the
// garbage collector sets, as kube's IsOnlyMutatingGCFields; the fields
// the server sets on every write are left out of the comparison.
func onlyGCFields(obj, old runtime.Object) bool {
	if obj == nil || old == nil {
		return false
	}
	c := obj.DeepCopyObject()
	cm, err := meta.Accessor(c)
	if err != nil {
		return false
	}
	om, err := meta.Accessor(old)
	if err != nil {
		return false
	}
	cm.SetOwnerReferences(om.GetOwnerReferences())
	cm.SetFinalizers(om.GetFinalizers())
	cm.SetDeletionTimestamp(om.GetDeletionTimestamp())
	cm.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
	cm.SetManagedFields(om.GetManagedFields())
	cm.SetResourceVersion(om.GetResourceVersion())
	cm.SetGeneration(om.GetGeneration())
	return equality.Semantic.DeepEqual(c, old)
}
