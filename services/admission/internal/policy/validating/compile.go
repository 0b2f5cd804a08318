package validating

import (
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	kubevalidating "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// cache holds each policy compiled once per generation: the spec changes
// only with the generation, and compiling is far costlier than
// evaluating.
type cache struct {
	env *environment.EnvSet

	mu       sync.Mutex
	compiled map[types.UID]compiled
	// compilations counts compilations, for tests.
	compilations int
}

type compiled struct {
	generation int64
	validator  kubevalidating.Validator
}

func newCache() *cache {
	return &cache{env: environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()), compiled: map[types.UID]compiled{}}
}

// validator returns p compiled, compiling it on first sight of its
// generation.
func (c *cache) validator(p *admissionregistrationv1.ValidatingAdmissionPolicy) kubevalidating.Validator {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.compiled[p.UID]; ok && e.generation == p.Generation {
		return e.validator
	}
	v := compile(c.env, p)
	c.compilations++
	c.compiled[p.UID] = compiled{generation: p.Generation, validator: v}
	return v
}

// prune forgets the policies that are gone.
func (c *cache) prune(live map[types.UID]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.compiled {
		if !live[uid] {
			delete(c.compiled, uid)
		}
	}
}

// compile is kube's compilePolicy. The validations and matchConditions
// are compiled with the authorizer variable declared, as kube's are, so
// that they type-check alike; it is never bound, so an expression that
// reads it fails when evaluated.
func compile(env *environment.EnvSet, p *admissionregistrationv1.ValidatingAdmissionPolicy) kubevalidating.Validator {
	hasParams := p.Spec.ParamKind != nil
	vars := celplugin.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	messageVars := celplugin.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false}
	failurePolicy := p.Spec.FailurePolicy
	compiler, err := celplugin.NewCompositedCompiler(env)
	if err != nil {
		return kubevalidating.NewValidator(nil, nil, nil, nil, failurePolicy, err)
	}
	variables := make([]celplugin.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		variables[i] = &kubevalidating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(variables, vars, environment.StoredExpressions)

	var matcher matchconditions.Matcher
	if mcs := p.Spec.MatchConditions; len(mcs) > 0 {
		exprs := make([]celplugin.ExpressionAccessor, len(mcs))
		for i := range mcs {
			exprs[i] = (*matchconditions.MatchCondition)(&mcs[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(exprs, vars, environment.StoredExpressions), failurePolicy, "policy", "validate", p.Name)
	}
	validations := make([]celplugin.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]celplugin.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &kubevalidating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &kubevalidating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	annotations := make([]celplugin.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		annotations[i] = &kubevalidating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return kubevalidating.NewValidator(
		compiler.CompileCondition(validations, vars, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(annotations, vars, environment.StoredExpressions),
		compiler.CompileCondition(messages, messageVars, environment.StoredExpressions),
		failurePolicy,
		nil,
	)
}
