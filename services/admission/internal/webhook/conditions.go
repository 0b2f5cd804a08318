package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"kplane.dev/services/admission/internal/review"
)

// matchCondition is a webhook's matchCondition as kube's CEL library reads
// an expression.
type matchCondition admissionregistrationv1.MatchCondition

func (c *matchCondition) GetExpression() string    { return c.Expression }
func (c *matchCondition) ReturnTypes() []*cel.Type { return []*cel.Type{cel.BoolType} }

// conditions compiles matchConditions once per distinct set of
// expressions: the hooks are rebuilt from the configurations on every
// write, and compiling is far costlier than evaluating.
type conditions struct {
	compiler celplugin.ConditionCompiler
	mu       sync.Mutex
	compiled map[string]celplugin.ConditionEvaluator
}

func newConditions() *conditions {
	return &conditions{
		compiler: celplugin.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())),
		compiled: map[string]celplugin.ConditionEvaluator{},
	}
}

func (c *conditions) evaluator(mcs []admissionregistrationv1.MatchCondition) celplugin.ConditionEvaluator {
	var key strings.Builder
	for _, mc := range mcs {
		key.WriteString(mc.Name + "\x00" + mc.Expression + "\x00")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.compiled[key.String()]; ok {
		return e
	}
	exprs := make([]celplugin.ExpressionAccessor, len(mcs))
	for i := range mcs {
		exprs[i] = (*matchCondition)(&mcs[i])
	}
	e := c.compiler.CompileCondition(exprs, celplugin.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	c.compiled[key.String()] = e
	return e
}

// matchConditions says whether every matchCondition of h holds for a. A
// condition that fails to evaluate refuses the write when h's
// failurePolicy is Fail (the default), with kube's Forbidden, and skips h
// when it is Ignore; a false condition skips h whatever the errors.
func (d *Dispatcher) matchConditions(ctx context.Context, h *hook, a *review.Attributes) (bool, error) {
	if len(h.matchConditions) == 0 {
		return true, nil
	}
	va, err := a.Versioned()
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("preparing the matchConditions of webhook %q: %w", h.name, err))
	}
	req := a.Request.DeepCopy()
	req.Object, req.OldObject = runtime.RawExtension{Object: va.GetObject()}, runtime.RawExtension{Object: va.GetOldObject()}
	results, _, err := d.conditions.evaluator(h.matchConditions).ForInput(ctx, va, req, celplugin.OptionalVariableBindings{Authorizer: d.cfg.Authorizer}, nil, celconfig.RuntimeCELCostBudgetMatchConditions)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range results {
		if r.Error != nil {
			errs = append(errs, r.Error)
		}
		if r.EvalResult == celtypes.False {
			return false, nil
		}
	}
	if len(errs) == 0 {
		return true, nil
	}
	if h.ignoresFailures() {
		return false, nil
	}
	gr := schema.GroupResource{Group: a.Request.Resource.Group, Resource: a.Request.Resource.Resource}
	return false, apierrors.NewForbidden(gr, a.Request.Name, utilerrors.NewAggregate(errs))
}
