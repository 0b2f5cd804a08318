package admissionregistration

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	celgo "github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

var (
	patchTypes = []string{string(admissionv1.PatchTypeApplyConfiguration), string(admissionv1.PatchTypeJSONPatch)}
	// mutatingOperations are the operations a mutating policy may match:
	// a delete carries no object to mutate.
	mutatingOperations = []string{string(admissionv1.OperationAll), string(admissionv1.Connect), string(admissionv1.Create), string(admissionv1.Update)}
)

// mutatingPolicyExpressions are the expressions of a stored policy. An
// update compiles an expression it keeps in the environment of stored
// expressions, so that what was once accepted stays acceptable.
type mutatingPolicyExpressions struct {
	matchConditions, variables, patches sets.Set[string]
}

func storedMutatingPolicyExpressions(p *admissionv1.MutatingAdmissionPolicy) mutatingPolicyExpressions {
	e := mutatingPolicyExpressions{matchConditions: sets.New[string](), variables: sets.New[string](), patches: sets.New[string]()}
	if p == nil {
		return e
	}
	for _, c := range p.Spec.MatchConditions {
		e.matchConditions.Insert(c.Expression)
	}
	for _, v := range p.Spec.Variables {
		e.variables.Insert(v.Expression)
	}
	for _, m := range p.Spec.Mutations {
		if m.ApplyConfiguration != nil {
			e.patches.Insert(m.ApplyConfiguration.Expression)
		}
		if m.JSONPatch != nil {
			e.patches.Insert(m.JSONPatch.Expression)
		}
	}
	return e
}

func envType(stored sets.Set[string], expression string) environment.Type {
	if stored.Has(expression) {
		return environment.StoredExpressions
	}
	return environment.NewExpressions
}

// validateMutatingPolicy checks p as kube does, compiling its CEL
// expressions in kube's environment. old is the stored policy on update.
func validateMutatingPolicy(p, old *admissionv1.MutatingAdmissionPolicy) field.ErrorList {
	spec := &p.Spec
	fldPath := field.NewPath("spec")
	stored := storedMutatingPolicyExpressions(old)
	var errs field.ErrorList
	errs = append(errs, validatePolicyCommon(spec.FailurePolicy, spec.ParamKind, spec.MatchConstraints, fldPath)...)
	if spec.MatchConstraints != nil {
		errs = append(errs, validateMutatingOperations(spec.MatchConstraints, fldPath.Child("matchConstraints", "resourceRules", "operations"))...)
	}
	hasParams := spec.ParamKind != nil
	if old == nil || !skipMutatingPolicyMatchConditions(p, old) {
		errs = append(errs, validateMatchConditions(spec.MatchConditions, fldPath.Child("matchConditions"))...)
		errs = append(errs, compileMatchConditions(spec.MatchConditions, hasParams, stored, fldPath.Child("matchConditions"))...)
	}
	// The composited compiler keeps each variable for the expressions
	// after it, as the admission service compiles them.
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return append(errs, field.InternalError(fldPath, fmt.Errorf("create the CEL compiler: %w", err)))
	}
	for i := range spec.Variables {
		p := fldPath.Child("variables").Index(i)
		v := &spec.Variables[i]
		errs = append(errs, validateVariable(v, p)...)
		if strings.TrimSpace(v.Expression) == "" {
			continue
		}
		accessor := &variable{name: v.Name, expression: v.Expression}
		res := compiler.CompileAndStoreVariable(accessor, plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, envType(stored.variables, v.Expression))
		if res.Error != nil {
			errs = append(errs, celError(p.Child("expression"), v.Expression, res.Error))
		}
	}
	if len(spec.Mutations) == 0 {
		errs = append(errs, field.Required(fldPath.Child("mutations"), "mutations must contain at least one item"))
	}
	for i := range spec.Mutations {
		errs = append(errs, validateMutation(compiler, &spec.Mutations[i], hasParams, stored, fldPath.Child("mutations").Index(i))...)
	}
	switch {
	case spec.ReinvocationPolicy == "":
		errs = append(errs, field.Required(fldPath.Child("reinvocationPolicy"), ""))
	case !slices.Contains(reinvocationPolicies, string(spec.ReinvocationPolicy)):
		errs = append(errs, field.NotSupported(fldPath.Child("reinvocationPolicy"), spec.ReinvocationPolicy, reinvocationPolicies))
	}
	return errs
}

// validateMutatingOperations refuses DELETE in the rules of a mutating
// policy or binding; kube reports it on the path without indexes.
func validateMutatingOperations(m *admissionv1.MatchResources, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, r := range m.ResourceRules {
		for _, op := range r.Operations {
			if !slices.Contains(mutatingOperations, string(op)) {
				errs = append(errs, field.NotSupported(fldPath, op, mutatingOperations))
			}
		}
	}
	return errs
}

func validateMutation(compiler *plugincel.CompositedCompiler, m *admissionv1.Mutation, hasParams bool, stored mutatingPolicyExpressions, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true, HasPatchTypes: true}
	compile := func(accessor plugincel.ExpressionAccessor, expression string, p *field.Path) {
		if strings.TrimSpace(expression) == "" {
			errs = append(errs, field.Required(p, ""))
			return
		}
		res := compiler.CompileCELExpression(accessor, opts, envType(stored.patches, expression))
		if res.Error != nil {
			errs = append(errs, celError(p, accessor.GetExpression(), res.Error))
		}
	}
	switch m.PatchType {
	case "":
		errs = append(errs, field.Required(fldPath.Child("patchType"), ""))
	case admissionv1.PatchTypeApplyConfiguration:
		if m.ApplyConfiguration == nil {
			errs = append(errs, field.Required(fldPath.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
		} else {
			expr := strings.TrimSpace(m.ApplyConfiguration.Expression)
			compile(&patch.ApplyConfigurationCondition{Expression: expr}, m.ApplyConfiguration.Expression, fldPath.Child("applyConfiguration", "expression"))
		}
		if m.JSONPatch != nil {
			errs = append(errs, field.Invalid(fldPath.Child("jsonPatch"), "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
		}
	case admissionv1.PatchTypeJSONPatch:
		if m.JSONPatch == nil {
			errs = append(errs, field.Required(fldPath.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
		} else {
			expr := strings.TrimSpace(m.JSONPatch.Expression)
			compile(&patch.JSONPatchCondition{Expression: expr}, m.JSONPatch.Expression, fldPath.Child("jsonPatch", "expression"))
		}
		if m.ApplyConfiguration != nil {
			errs = append(errs, field.Invalid(fldPath.Child("applyConfiguration"), "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("patchType"), m.PatchType, patchTypes))
	}
	return errs
}

// compileMatchConditions compiles each present expression as kube's
// match conditions are compiled: to a bool, with the authorizer and,
// when the policy has a param kind, params.
func compileMatchConditions(conditions []admissionv1.MatchCondition, hasParams bool, stored mutatingPolicyExpressions, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	compiler := plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	for i, c := range conditions {
		expr := strings.TrimSpace(c.Expression)
		if expr == "" {
			continue // reported as required
		}
		res := compiler.CompileCELExpression(&matchconditions.MatchCondition{Expression: expr}, opts, envType(stored.matchConditions, expr))
		if res.Error != nil {
			errs = append(errs, celError(fldPath.Index(i).Child("expression"), expr, res.Error))
		}
	}
	return errs
}

// celError is kube's translation of a compile error to a field error.
func celError(fldPath *field.Path, expression string, err *apiservercel.Error) *field.Error {
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.Required(fldPath, err.Detail)
	case apiservercel.ErrorTypeInvalid:
		return field.Invalid(fldPath, expression, err.Detail)
	case apiservercel.ErrorTypeInternal:
		return field.InternalError(fldPath, err)
	}
	return field.InternalError(fldPath, fmt.Errorf("unsupported error type: %w", err))
}

// variable is a policy variable as kube's CEL compiler takes it.
type variable struct{ name, expression string }

func (v *variable) GetName() string       { return v.name }
func (v *variable) GetExpression() string { return v.expression }
func (v *variable) ReturnTypes() []*celgo.Type {
	return []*celgo.Type{celgo.AnyType, celgo.DynType}
}

// skipMutatingPolicyMatchConditions is true when an update leaves the
// match conditions and what they are checked against as they were.
func skipMutatingPolicyMatchConditions(p, old *admissionv1.MutatingAdmissionPolicy) bool {
	return reflect.DeepEqual(p.Spec.ParamKind, old.Spec.ParamKind) &&
		reflect.DeepEqual(p.Spec.MatchConditions, old.Spec.MatchConditions)
}

func validateMutatingBinding(b *admissionv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	spec := &b.Spec
	fldPath := field.NewPath("spec")
	var errs field.ErrorList
	if spec.PolicyName == "" {
		errs = append(errs, field.Required(fldPath.Child("policyName"), ""))
	} else {
		for _, msg := range genericvalidation.NameIsDNSSubdomain(spec.PolicyName, false) {
			errs = append(errs, field.Invalid(fldPath.Child("policyName"), spec.PolicyName, msg))
		}
	}
	errs = append(errs, validateParamRef(spec.ParamRef, fldPath.Child("paramRef"))...)
	if spec.MatchResources != nil {
		errs = append(errs, validateMatchResources(spec.MatchResources, fldPath.Child("matchResources"))...)
		errs = append(errs, validateMutatingOperations(spec.MatchResources, fldPath.Child("matchResources", "resourceRules", "operations"))...)
	}
	return errs
}
