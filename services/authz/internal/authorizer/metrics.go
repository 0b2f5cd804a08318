package authorizer

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// DecisionMetrics are kube-apiserver's
// apiserver_authorization_decisions_total: the terminal decisions of each
// mode, by its type and name; no opinion is not terminal and not counted.
type DecisionMetrics struct {
	decisions *prometheus.CounterVec
}

// NewDecisionMetrics registers the decision metrics on reg.
func NewDecisionMetrics(reg prometheus.Registerer) (*DecisionMetrics, error) {
	m := &DecisionMetrics{decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apiserver_authorization_decisions_total",
		Help: "Total number of terminal decisions made by an authorizer split by authorizer type, name, and decision.",
	}, []string{"type", "name", "decision"})}
	if err := reg.Register(m.decisions); err != nil {
		return nil, fmt.Errorf("register authorization decision metrics: %w", err)
	}
	return m, nil
}

// Instrument returns mode with its terminal decisions counted. The type
// label is the mode's name, the name label its lower case, as kube names
// an authorizer configured by --authorization-mode.
func (m *DecisionMetrics) Instrument(mode Mode) Mode {
	allowed := m.decisions.WithLabelValues(mode.Name, strings.ToLower(mode.Name), "allowed")
	denied := m.decisions.WithLabelValues(mode.Name, strings.ToLower(mode.Name), "denied")
	mode.Authorizer = instrumented{next: mode.Authorizer, allowed: allowed, denied: denied}
	return mode
}

type instrumented struct {
	next            Authorizer
	allowed, denied prometheus.Counter
}

func (a instrumented) Authorize(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (Decision, string, error) {
	d, reason, err := a.next.Authorize(ctx, spec)
	switch d {
	case Allow:
		a.allowed.Inc()
	case Deny:
		a.denied.Inc()
	}
	return d, reason, err
}
