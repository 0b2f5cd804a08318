package mutating

import (
	"fmt"
	"sync"

	celgo "github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// compiledPolicy is a policy's expressions, compiled once per generation
// as kube's compilePolicy compiles them.
type compiledPolicy struct {
	generation int64
	// matcher evaluates the match conditions; nil without any.
	matcher matchconditions.Matcher
	// patchers are the mutations, in order, one each.
	patchers []patch.Patcher
	// compiler holds the variables for the expressions that read them.
	compiler *plugincel.CompositedCompiler
	// err is a failure to build the compiler itself. An expression that
	// does not compile is not one: its patcher or matcher reports it when
	// it runs, under the policy's failurePolicy, as kube's do.
	err error
}

// compiledPolicies caches the compiled policies by identity: the UID
// (the name when a policy has none) and the generation.
type compiledPolicies struct {
	mu    sync.Mutex
	byKey map[string]*compiledPolicy
	// compiles counts compilations, for tests.
	compiles int
}

func newCompiledPolicies() *compiledPolicies {
	return &compiledPolicies{byKey: map[string]*compiledPolicy{}}
}

func policyKey(p *admissionregistrationv1.MutatingAdmissionPolicy) string {
	if p.UID != "" {
		return "uid/" + string(p.UID)
	}
	return "name/" + p.Name
}

// get returns p compiled, compiling it when its generation is new.
func (c *compiledPolicies) get(p *admissionregistrationv1.MutatingAdmissionPolicy) *compiledPolicy {
	k := policyKey(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cp, ok := c.byKey[k]; ok && cp.generation == p.Generation {
		return cp
	}
	cp := compile(p)
	c.byKey[k] = cp
	c.compiles++
	return cp
}

// prune forgets the policies that are gone.
func (c *compiledPolicies) prune(live []*admissionregistrationv1.MutatingAdmissionPolicy) {
	keep := make(map[string]bool, len(live))
	for _, p := range live {
		keep[policyKey(p)] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.byKey {
		if !keep[k] {
			delete(c.byKey, k)
		}
	}
}

func compile(p *admissionregistrationv1.MutatingAdmissionPolicy) *compiledPolicy {
	cp := &compiledPolicy{generation: p.Generation}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		cp.err = fmt.Errorf("failed to initialize CEL compiler: %w", err)
		return cp
	}
	cp.compiler = compiler
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		vars[i] = &variable{name: v.Name, expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
	if conds := p.Spec.MatchConditions; len(conds) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(conds))
		for i := range conds {
			accessors[i] = (*matchconditions.MatchCondition)(&conds[i])
		}
		cp.matcher = matchconditions.NewMatcher(compiler.CompileCondition(accessors, opts, environment.StoredExpressions),
			p.Spec.FailurePolicy, "policy", "mutate", p.Name)
	}
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	cp.patchers = make([]patch.Patcher, len(p.Spec.Mutations))
	for i, mu := range p.Spec.Mutations {
		switch {
		case mu.PatchType == admissionregistrationv1.PatchTypeJSONPatch && mu.JSONPatch != nil:
			eval := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: mu.JSONPatch.Expression}, patchOpts, environment.StoredExpressions)
			cp.patchers[i] = patch.NewJSONPatcher(eval)
		case mu.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && mu.ApplyConfiguration != nil:
			eval := compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: mu.ApplyConfiguration.Expression}, patchOpts, environment.StoredExpressions)
			cp.patchers[i] = patch.NewApplyConfigurationPatcher(eval)
		}
		// A mutation of neither kind, which validation refuses, keeps a
		// nil patcher and fails as kube's missing evaluator does.
	}
	return cp
}

// variable is a policy variable as kube's CEL compiler takes it.
type variable struct{ name, expression string }

func (v *variable) GetName() string       { return v.name }
func (v *variable) GetExpression() string { return v.expression }
func (v *variable) ReturnTypes() []*celgo.Type {
	return []*celgo.Type{celgo.AnyType, celgo.DynType}
}
