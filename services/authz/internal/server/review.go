package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/proto/authz"
	"kplane.dev/services/authz/internal/authorizer"
)

// maxReviewBytes bounds a review's body.
const maxReviewBytes = 1 << 20

// reviewer answers reviews with the mode chain, whichever transport they
// came by.
type reviewer struct {
	chain     authorizer.Chain
	decisions *prometheus.CounterVec
	duration  prometheus.Histogram
	// errors counts reviews whose modes failed to evaluate.
	errors prometheus.Counter
	// inflight counts reviews being answered, so that shutdown can wait
	// for their replies before NATS closes.
	inflight inflight
}

// inflight counts work in progress. Unlike a sync.WaitGroup it may be
// waited on while work still starts: natsrpc hands each request to a
// goroutine of its own, which may begin after the subscription drained.
type inflight struct {
	mu sync.Mutex
	n  int
}

func (f *inflight) add(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n += d
}

// wait polls until no work is in progress or ctx ends.
func (f *inflight) wait(ctx context.Context) {
	for {
		f.mu.Lock()
		n := f.n
		f.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func newReviewer(chain authorizer.Chain, reg prometheus.Registerer) (*reviewer, error) {
	r := &reviewer{
		chain: chain,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "authz", Name: "decisions_total",
			Help: "SubjectAccessReviews answered, by decision (allow, deny, no-opinion).",
		}, []string{"decision"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "kplane", Subsystem: "authz", Name: "decision_duration_seconds",
			Help:    "Time to decide one SubjectAccessReview, transport excluded.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "authz", Name: "evaluation_errors_total",
			Help: "SubjectAccessReviews answered with an evaluationError: a mode (a policy, the webhook) failed to decide.",
		}),
	}
	for _, c := range []prometheus.Collector{r.decisions, r.duration, r.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return r, nil
}

// decide fills in review's status as kube's SubjectAccessReview REST
// storage does, after kube's validation of the spec, and says whether the
// decision holds for every name of the resource (authz.AnnotationEveryName).
func (r *reviewer) decide(ctx context.Context, review *authorizationv1.SubjectAccessReview) (bool, error) {
	spec := &review.Spec
	if (spec.ResourceAttributes == nil) == (spec.NonResourceAttributes == nil) {
		return false, apierrors.NewBadRequest("spec: exactly one of nonResourceAttributes or resourceAttributes must be specified")
	}
	if spec.User == "" && len(spec.Groups) == 0 {
		return false, apierrors.NewBadRequest("spec.user: at least one of user or group must be specified")
	}
	start := time.Now()
	d, reason, everyName, err := r.chain.Decide(ctx, spec)
	r.duration.Observe(time.Since(start).Seconds())
	r.decisions.WithLabelValues(d.String()).Inc()
	review.Status = authorizationv1.SubjectAccessReviewStatus{
		Allowed: d == authorizer.Allow,
		Denied:  d == authorizer.Deny,
		Reason:  reason,
	}
	if err != nil {
		r.errors.Inc()
		review.Status.EvaluationError = err.Error()
	}
	review.APIVersion = authorizationv1.SchemeGroupVersion.String()
	review.Kind = "SubjectAccessReview"
	return everyName && spec.ResourceAttributes != nil && spec.ResourceAttributes.Name != "", nil
}

// accessReview answers proto/authz.SubjectAccessReview.
func (r *reviewer) accessReview(ctx context.Context, payload []byte) ([]byte, error) {
	r.inflight.add(1)
	defer r.inflight.add(-1)
	var review authorizationv1.SubjectAccessReview
	if err := json.Unmarshal(payload, &review); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode SubjectAccessReview: %v", err))
	}
	everyName, err := r.decide(ctx, &review)
	if err != nil {
		return nil, err
	}
	if everyName {
		metav1.SetMetaDataAnnotation(&review.ObjectMeta, authz.AnnotationEveryName, "true")
	}
	return json.Marshal(&review)
}

// rulesReview answers proto/authz.SubjectRulesReview as kube's
// SelfSubjectRulesReview storage does: an error makes the answer
// incomplete and is its evaluationError.
func (r *reviewer) rulesReview(ctx context.Context, payload []byte) ([]byte, error) {
	r.inflight.add(1)
	defer r.inflight.add(-1)
	var review authz.RulesReview
	if err := json.Unmarshal(payload, &review); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode RulesReview: %v", err))
	}
	// An empty namespace asks for the rules granted cluster-wide, as
	// kube's RulesFor(user, "") does: core's RBAC escalation checks of
	// ClusterRoles and ClusterRoleBindings ask it. The API's own rule that
	// a SelfSubjectRulesReview names a namespace is core's to enforce.
	rules, err := r.chain.RulesFor(ctx, &review)
	status := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    rules.Resource,
		NonResourceRules: rules.NonResource,
		Incomplete:       rules.Incomplete,
	}
	if status.ResourceRules == nil {
		status.ResourceRules = []authorizationv1.ResourceRule{}
	}
	if status.NonResourceRules == nil {
		status.NonResourceRules = []authorizationv1.NonResourceRule{}
	}
	if err != nil {
		status.Incomplete = true
		status.EvaluationError = err.Error()
	}
	return json.Marshal(&status)
}

// serveWebhook is kube's authorization webhook: a SubjectAccessReview in,
// the same with its status out, for callers with a client certificate of
// --client-ca-file.
func (s *Server) serveWebhook(c echo.Context) error {
	req := c.Request()
	if _, err := frontproxy.VerifyClient(req, s.cfg.serving.ClientCA); err != nil {
		s.log.Debug("subject access review refused", "remote", req.RemoteAddr, "err", err)
		return apistatus.Write(c, apierrors.NewUnauthorized("a client certificate of the client CA is required"))
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxReviewBytes))
	if err != nil {
		return apistatus.Write(c, apierrors.NewBadRequest(fmt.Sprintf("read body: %v", err)))
	}
	var review authorizationv1.SubjectAccessReview
	if err := json.Unmarshal(body, &review); err != nil {
		return apistatus.Write(c, apierrors.NewBadRequest(fmt.Sprintf("decode SubjectAccessReview: %v", err)))
	}
	if gv := authorizationv1.SchemeGroupVersion.String(); review.APIVersion != gv || review.Kind != "SubjectAccessReview" {
		return apistatus.Write(c, apierrors.NewBadRequest(fmt.Sprintf("want a %s SubjectAccessReview, got %s %s", gv, review.APIVersion, review.Kind)))
	}
	s.reviews.inflight.add(1)
	defer s.reviews.inflight.add(-1)
	// A webhook's caller has no use for the name scope: kube's webhook
	// authorizer caches by the whole spec.
	if _, err := s.reviews.decide(req.Context(), &review); err != nil {
		return apistatus.Write(c, err)
	}
	return c.JSON(http.StatusOK, &review)
}
