package policy

import (
	"fmt"
	"os"
	"slices"
	"strings"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"

	"kplane.dev/libs/apiserver/requestinfo"
)

// Attributes are what a rule matches a request on: who asks (the
// authenticated user, before impersonation, as kube's audit filter sees
// it) and the request info.
type Attributes struct {
	User   string
	Groups []string
	Info   *requestinfo.Info
}

// Decision is how one request is audited.
type Decision struct {
	Level             auditv1.Level
	OmitStages        []auditv1.Stage
	OmitManagedFields bool
}

// Omits reports whether d leaves stage out.
func (d Decision) Omits(stage auditv1.Stage) bool { return slices.Contains(d.OmitStages, stage) }

// Evaluator decides on requests by one policy.
type Evaluator struct {
	rules []auditv1.PolicyRule
	// fallback is the decision when no rule matches.
	fallback Decision
	// omitManagedFields is the policy's default for rules that do not say.
	omitManagedFields bool
}

// Load reads and validates the policy file at path.
func Load(path string) (*Evaluator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read audit policy: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("audit policy %s: %w", path, err)
	}
	return New(p), nil
}

// Parse decodes and validates a policy in YAML or JSON. Only
// audit.k8s.io/v1 is read: kube deprecated and removed the beta versions.
func Parse(data []byte) (*auditv1.Policy, error) {
	var p auditv1.Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if p.APIVersion != auditv1.SchemeGroupVersion.String() || p.Kind != "Policy" {
		return nil, fmt.Errorf("want apiVersion %s and kind Policy, got %q and %q", auditv1.SchemeGroupVersion, p.APIVersion, p.Kind)
	}
	if err := validate(&p); err != nil {
		return nil, err
	}
	return &p, nil
}

var (
	levels = []auditv1.Level{auditv1.LevelNone, auditv1.LevelMetadata, auditv1.LevelRequest, auditv1.LevelRequestResponse}
	stages = []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseStarted, auditv1.StageResponseComplete, auditv1.StagePanic}
)

// validate checks what kube's policy validation checks: known levels and
// stages, and rules that do not mix resources with non-resource URLs.
func validate(p *auditv1.Policy) error {
	var errs []string
	checkStages := func(where string, ss []auditv1.Stage) {
		for _, s := range ss {
			if !slices.Contains(stages, s) {
				errs = append(errs, fmt.Sprintf("%s: unknown stage %q", where, s))
			}
		}
	}
	checkStages("omitStages", p.OmitStages)
	if len(p.Rules) == 0 {
		errs = append(errs, "rules: at least one rule is required")
	}
	for i, r := range p.Rules {
		where := fmt.Sprintf("rules[%d]", i)
		if !slices.Contains(levels, r.Level) {
			errs = append(errs, fmt.Sprintf("%s.level: unknown level %q", where, r.Level))
		}
		checkStages(where+".omitStages", r.OmitStages)
		if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
			errs = append(errs, where+": rules cannot apply to both regular resources and non-resource URLs")
		}
		for j, u := range r.NonResourceURLs {
			if u != "*" && !strings.HasPrefix(u, "/") {
				errs = append(errs, fmt.Sprintf("%s.nonResourceURLs[%d]: %q must start with / or be *", where, j, u))
			}
			if strings.Contains(strings.TrimSuffix(u, "*"), "*") {
				errs = append(errs, fmt.Sprintf("%s.nonResourceURLs[%d]: %q may hold * only at its end", where, j, u))
			}
		}
		for j, gr := range r.Resources {
			if len(gr.ResourceNames) > 0 && len(gr.Resources) == 0 {
				errs = append(errs, fmt.Sprintf("%s.resources[%d].resourceNames: require resources", where, j))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid: %s", strings.Join(errs, "; "))
	}
	return nil
}

// New builds the evaluator of a valid policy. The policy's omitStages
// apply to every rule, and to requests no rule matches.
func New(p *auditv1.Policy) *Evaluator {
	e := &Evaluator{
		fallback:          Decision{Level: auditv1.LevelNone, OmitStages: p.OmitStages, OmitManagedFields: p.OmitManagedFields},
		omitManagedFields: p.OmitManagedFields,
	}
	for _, r := range p.Rules {
		r.OmitStages = union(p.OmitStages, r.OmitStages)
		e.rules = append(e.rules, r)
	}
	return e
}

func union(a, b []auditv1.Stage) []auditv1.Stage {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Evaluate decides on the request of attrs: the first matching rule's
// level and stages, or None.
func (e *Evaluator) Evaluate(attrs Attributes) Decision {
	for i := range e.rules {
		r := &e.rules[i]
		if matches(r, attrs) {
			omit := e.omitManagedFields
			if r.OmitManagedFields != nil {
				omit = *r.OmitManagedFields
			}
			return Decision{Level: r.Level, OmitStages: r.OmitStages, OmitManagedFields: omit}
		}
	}
	return e.fallback
}

func matches(r *auditv1.PolicyRule, attrs Attributes) bool {
	if len(r.Users) > 0 && !slices.Contains(r.Users, attrs.User) {
		return false
	}
	if len(r.UserGroups) > 0 && !slices.ContainsFunc(attrs.Groups, func(g string) bool { return slices.Contains(r.UserGroups, g) }) {
		return false
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, attrs.Info.Verb) {
		return false
	}
	if len(r.Namespaces) > 0 || len(r.Resources) > 0 {
		return matchesResource(r, attrs.Info)
	}
	if len(r.NonResourceURLs) > 0 {
		return matchesNonResource(r, attrs.Info)
	}
	return true
}

func matchesNonResource(r *auditv1.PolicyRule, info *requestinfo.Info) bool {
	if info.IsResourceRequest {
		return false
	}
	for _, spec := range r.NonResourceURLs {
		if pathMatches(info.Path, spec) {
			return true
		}
	}
	return false
}

// pathMatches matches kube's way: "*" is every path, a trailing "*" a
// prefix, anything else the path itself.
func pathMatches(path, spec string) bool {
	if spec == "*" || spec == path {
		return true
	}
	prefix, ok := strings.CutSuffix(spec, "*")
	return ok && strings.HasPrefix(path, prefix)
}

func matchesResource(r *auditv1.PolicyRule, info *requestinfo.Info) bool {
	if !info.IsResourceRequest {
		return false
	}
	// A cluster-scoped resource is in namespace "".
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, info.Namespace) {
		return false
	}
	if len(r.Resources) == 0 {
		return true
	}
	combined := info.Resource
	if info.Subresource != "" {
		combined = info.Resource + "/" + info.Subresource
	}
	for _, gr := range r.Resources {
		if gr.Group != info.APIGroup {
			continue
		}
		if len(gr.Resources) == 0 {
			return true
		}
		if len(gr.ResourceNames) > 0 && !slices.Contains(gr.ResourceNames, info.Name) {
			continue
		}
		for _, res := range gr.Resources {
			switch {
			case res == combined || res == "*":
				return true
			case info.Subresource != "" && strings.HasPrefix(res, "*/") && res[2:] == info.Subresource:
				return true
			case strings.HasSuffix(res, "/*") && strings.TrimSuffix(res, "/*") == info.Resource:
				return true
			}
		}
	}
	return false
}
