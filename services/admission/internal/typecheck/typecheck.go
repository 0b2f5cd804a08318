package typecheck

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	admissionregistrationv1apply "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
)

// FieldManager is kube's controller's name, the field manager of the
// status it applies.
const FieldManager = "validatingadmissionpolicy-status-controller"

// Policies lists the ValidatingAdmissionPolicies, usually from an
// informer.
type Policies interface {
	Policies() ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error)
}

// Controller type-checks policies and applies their status.
type Controller struct {
	policies Policies
	client   kubernetes.Interface
	checker  *validating.TypeChecker
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	log      *slog.Logger
	interval time.Duration
	// done holds the generation last applied by policy UID, so that a
	// status the informer has not caught up with is not applied again.
	done map[string]int64
}

// New builds a Controller that reads policies and writes through client,
// looking at the policies every interval.
func New(policies Policies, client kubernetes.Interface, interval time.Duration, log *slog.Logger) *Controller {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	return &Controller{
		policies: policies,
		client:   client,
		mapper:   mapper,
		checker:  &validating.TypeChecker{SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: client.Discovery()}, RestMapper: mapper},
		log:      log,
		interval: interval,
		done:     map[string]int64{},
	}
}

// Run checks the policies until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.Sync(ctx)
		}
	}
}

// Sync checks every policy whose generation its status has not seen.
func (c *Controller) Sync(ctx context.Context) {
	ps, err := c.policies.Policies()
	if err != nil {
		c.log.Warn("list validating admission policies", "err", err)
		return
	}
	live := make(map[string]bool, len(ps))
	for _, p := range ps {
		live[string(p.UID)] = true
	}
	for uid := range c.done {
		if !live[uid] {
			delete(c.done, uid)
		}
	}
	for _, p := range ps {
		if p.Generation <= p.Status.ObservedGeneration || c.done[string(p.UID)] >= p.Generation {
			continue
		}
		if err := c.apply(ctx, p); err != nil {
			c.log.Warn("type-check validating admission policy", "policy", p.Name, "err", err)
			// A kind not found may be a CRD discovery has not shown yet.
			c.mapper.Reset()
			continue
		}
		c.done[string(p.UID)] = p.Generation
	}
}

func (c *Controller) apply(ctx context.Context, p *admissionregistrationv1.ValidatingAdmissionPolicy) error {
	warnings := c.checker.Check(p)
	applied := make([]*admissionregistrationv1apply.ExpressionWarningApplyConfiguration, 0, len(warnings))
	for _, w := range warnings {
		applied = append(applied, admissionregistrationv1apply.ExpressionWarning().WithFieldRef(w.FieldRef).WithWarning(w.Warning))
	}
	status := admissionregistrationv1apply.ValidatingAdmissionPolicy(p.Name).
		WithStatus(admissionregistrationv1apply.ValidatingAdmissionPolicyStatus().
			WithObservedGeneration(p.Generation).
			WithTypeChecking(admissionregistrationv1apply.TypeChecking().WithExpressionWarnings(applied...)))
	if _, err := c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply the status of %s: %w", p.Name, err)
	}
	return nil
}
