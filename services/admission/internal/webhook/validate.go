package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/services/admission/internal/review"
)

// validatingFailedOpenAnnotationPrefix is kube's audit annotation key
// prefix for a validating webhook that failed open, followed by
// round_0_index_<index among the matching webhooks>.
const validatingFailedOpenAnnotationPrefix = "failed-open.validating.webhook.admission.k8s.io/"

// Validate calls the validating webhooks that match a, all at once as
// kube does. When several refuse, the first refusal to arrive is
// returned. Errors are as Mutate's.
func (d *Dispatcher) Validate(ctx context.Context, a *review.Attributes) (*review.Result, error) {
	rec := &recorder{}
	if exempt(a) {
		return rec.result(nil), nil
	}
	hooks, err := d.validatingHooks()
	if err != nil {
		return nil, err
	}
	type call struct {
		h    *hook
		seen *review.Attributes
	}
	var relevant []call
	for _, h := range hooks {
		seen, err := d.matches(ctx, h, a)
		if err != nil {
			return nil, err
		}
		if seen != nil {
			relevant = append(relevant, call{h, seen})
		}
	}
	if len(relevant) == 0 {
		return rec.result(nil), nil
	}
	if ctx.Err() != nil {
		return nil, apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
	}
	errs := make(chan error, len(relevant))
	var wg sync.WaitGroup
	for i, c := range relevant {
		wg.Go(func() {
			if err := d.validate(ctx, c.h, i, c.seen, rec); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err, ok := <-errs; ok {
		// A refusal keeps the warnings and audit annotations made, as
		// kube audits a refused write with them.
		return rec.result(nil), err
	}
	return rec.result(nil), nil
}

func (d *Dispatcher) validate(ctx context.Context, h *hook, index int, a *review.Attributes, rec *recorder) error {
	ans, err := d.call(ctx, h, a, a.Object, false)
	var ce *callError
	if errors.As(err, &ce) {
		if !h.ignoresFailures() {
			return apierrors.NewInternalError(err)
		}
		d.cfg.Logger.WarnContext(ctx, "failed calling webhook, failing open", "webhook", h.name, "err", err)
		rec.annotate(fmt.Sprintf("%sround_0_index_%d", validatingFailedOpenAnnotationPrefix, index), h.name)
		return nil
	}
	if err != nil {
		return err
	}
	for k, v := range ans.auditAnnotations {
		rec.annotate(h.name+"/"+k, v)
	}
	rec.warn(ans.warnings)
	if !ans.allowed {
		return denied(h.name, ans.result)
	}
	return nil
}
