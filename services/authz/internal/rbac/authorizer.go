package rbac

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	authorizationv1 "k8s.io/api/authorization/v1"
)

//go:embed policy.rego
var policy string

// Decision is an authorizer's answer. Authorizers chain: the first that
// does not answer NoOpinion decides.
type Decision int

const (
	// DecisionNoOpinion leaves the request to the next authorizer.
	DecisionNoOpinion Decision = iota
	// DecisionAllow allows the request.
	DecisionAllow
	// DecisionDeny denies the request; no later authorizer is asked.
	DecisionDeny
)

func (d Decision) String() string {
	switch d {
	case DecisionAllow:
		return "Allow"
	case DecisionDeny:
		return "Deny"
	default:
		return "NoOpinion"
	}
}

// Attributes are what a SubjectAccessReview asks about.
type Attributes struct {
	User   string
	Groups []string
	// ResourceRequest selects between the resource attributes (APIGroup
	// to Name) and the non-resource Path.
	ResourceRequest bool
	Verb            string
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	Path            string
}

// AttributesFromSpec returns the attributes of a SubjectAccessReview.
func AttributesFromSpec(spec authorizationv1.SubjectAccessReviewSpec) Attributes {
	a := Attributes{User: spec.User, Groups: spec.Groups}
	if ra := spec.ResourceAttributes; ra != nil {
		a.ResourceRequest = true
		a.Verb = ra.Verb
		a.APIGroup = ra.Group
		a.Resource = ra.Resource
		a.Subresource = ra.Subresource
		a.Namespace = ra.Namespace
		a.Name = ra.Name
		return a
	}
	if nra := spec.NonResourceAttributes; nra != nil {
		a.Verb = nra.Verb
		a.Path = nra.Path
	}
	return a
}

// Authorizer decides requests with Kubernetes RBAC semantics over the
// objects of an Index. Like kube's RBAC authorizer it never denies: it
// allows, or has no opinion with the reason kube gives.
type Authorizer struct {
	index *Index
	query rego.PreparedEvalQuery
}

// NewAuthorizer compiles the RBAC policy once; each decision then evaluates
// it with its input only.
func NewAuthorizer(ctx context.Context, index *Index) (*Authorizer, error) {
	query, err := rego.New(
		rego.Query("data.kplane.rbac.result"),
		rego.Module("rbac.rego", policy),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("compile the RBAC policy: %w", err)
	}
	return &Authorizer{index: index, query: query}, nil
}

// Result is a decision with what it holds for.
type Result struct {
	Decision Decision
	Reason   string
	// EveryName says that a resource request would get the same decision
	// and reason whatever object it named.
	EveryName bool
}

// Authorize decides one request.
func (a *Authorizer) Authorize(ctx context.Context, attrs Attributes) (Decision, string, error) {
	r, err := a.Decide(ctx, attrs)
	return r.Decision, r.Reason, err
}

// Decide decides one request and says whether the decision holds for
// every name.
func (a *Authorizer) Decide(ctx context.Context, attrs Attributes) (Result, error) {
	groups := make([]*ast.Term, len(attrs.Groups))
	for i, g := range attrs.Groups {
		groups[i] = ast.StringTerm(g)
	}
	input := ast.NewObject(
		ast.Item(ast.StringTerm("user"), ast.StringTerm(attrs.User)),
		ast.Item(ast.StringTerm("groups"), ast.ArrayTerm(groups...)),
		ast.Item(ast.StringTerm("resourceRequest"), ast.BooleanTerm(attrs.ResourceRequest)),
		ast.Item(ast.StringTerm("verb"), ast.StringTerm(attrs.Verb)),
		ast.Item(ast.StringTerm("apiGroup"), ast.StringTerm(attrs.APIGroup)),
		ast.Item(ast.StringTerm("resource"), ast.StringTerm(attrs.Resource)),
		ast.Item(ast.StringTerm("subresource"), ast.StringTerm(attrs.Subresource)),
		ast.Item(ast.StringTerm("namespace"), ast.StringTerm(attrs.Namespace)),
		ast.Item(ast.StringTerm("name"), ast.StringTerm(attrs.Name)),
		ast.Item(ast.StringTerm("path"), ast.StringTerm(attrs.Path)),
		ast.Item(ast.StringTerm("grants"), ast.ArrayTerm(a.index.grants(attrs.User, attrs.Groups, attrs.Namespace)...)),
	)
	rs, err := a.query.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return Result{}, fmt.Errorf("evaluate the RBAC policy: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Result{}, fmt.Errorf("evaluate the RBAC policy: %d results, want 1", len(rs))
	}
	result, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return Result{}, fmt.Errorf("evaluate the RBAC policy: result is %T, want an object", rs[0].Expressions[0].Value)
	}
	allowed, _ := result["allowed"].(bool)
	r := Result{Decision: DecisionNoOpinion}
	r.Reason, _ = result["reason"].(string)
	r.EveryName, _ = result["everyName"].(bool)
	if allowed {
		r.Decision = DecisionAllow
	}
	return r, nil
}
