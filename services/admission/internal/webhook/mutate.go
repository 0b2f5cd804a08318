package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/auditannotation"
	"kplane.dev/services/admission/internal/review"
)

// Audit annotation key prefixes of kube's mutating webhooks, followed by
// round_<round>_index_<index>, index being the webhook's place among all
// the mutating webhooks in kube's order, called or not.
const (
	mutationAnnotationPrefix           = "mutation.webhook.admission.k8s.io/"
	mutationFailedOpenAnnotationPrefix = "failed-open." + mutationAnnotationPrefix
)

// Mutate calls the mutating webhooks that match a, one after the other in
// kube's order, each seeing the object the previous ones left. When a
// webhook changed the object, the webhooks with reinvocationPolicy
// IfNeeded that saw it before that change are called once more, in order,
// as kube does. A refusal or a failure of a webhook whose failurePolicy
// is Fail is an *apierrors.StatusError, returned with the result holding
// the warnings and audit annotations made until then, which kube keeps
// for the refused write's audit event; other errors mean the webhooks
// could not be listed.
func (d *Dispatcher) Mutate(ctx context.Context, a *review.Attributes) (*review.Result, error) {
	rec := &recorder{}
	if exempt(a) {
		return rec.result(nil), nil
	}
	hooks, err := d.mutatingHooks()
	if err != nil {
		return nil, err
	}
	m := &mutation{d: d, a: a, rec: rec, obj: a.Object.DeepCopy(),
		invoked: map[string]bool{}, reinvoke: map[string]bool{}}
	if err := m.round(ctx, hooks, 0); err != nil {
		return rec.result(nil), err
	}
	if m.changedInRound0 {
		if err := m.round(ctx, hooks, 1); err != nil {
			return rec.result(nil), err
		}
	}
	if a.Object == nil || equality.Semantic.DeepEqual(a.Object.Object, m.obj.Object) {
		return rec.result(nil), nil
	}
	return rec.result(m.obj), nil
}

// mutation is the state of one write's mutating phase.
type mutation struct {
	d   *Dispatcher
	a   *review.Attributes
	rec *recorder
	obj *unstructured.Unstructured
	// invoked are the IfNeeded webhooks called since the object last
	// changed; reinvoke those that a later change makes call again.
	invoked, reinvoke map[string]bool
	changedInRound0   bool
}

func (m *mutation) round(ctx context.Context, hooks []*hook, round int) error {
	for i, h := range hooks {
		// Selectors see the object as the webhooks before left it.
		seen, err := m.d.matches(ctx, h, m.a.WithObject(m.obj))
		if err != nil {
			return err
		}
		// A webhook that did not match the first time is not called in
		// the second round even if the object now matches it.
		if seen == nil || (round == 1 && !m.reinvoke[h.id()]) {
			continue
		}
		key := fmt.Sprintf("round_%d_index_%d", round, i)
		changed, err := m.invoke(ctx, h, seen, key)
		m.annotateMutation(h, key, changed)
		if changed {
			for id := range m.invoked {
				m.reinvoke[id] = true
			}
			clear(m.invoked)
			if round == 0 {
				m.changedInRound0 = true
			}
		}
		if h.reinvocationPolicy != nil && *h.reinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			m.invoked[h.id()] = true
		}
		if err == nil {
			continue
		}
		var ce *callError
		if !errors.As(err, &ce) {
			return err
		}
		if !h.ignoresFailures() {
			return apierrors.NewInternalError(err)
		}
		m.d.cfg.Logger.WarnContext(ctx, "failed calling webhook, failing open", "webhook", h.name, "err", err)
		m.rec.annotate(mutationFailedOpenAnnotationPrefix+key, h.name)
		if ctx.Err() != nil {
			return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
		}
	}
	return nil
}

// invoke calls h with the write as h sees it, seen, and applies its
// patch to m.obj, converting it back from the equivalent kind h may have
// seen it as; it reports whether the object changed. A patch applied is
// recorded under the annotation key suffix key.
func (m *mutation) invoke(ctx context.Context, h *hook, seen *review.Attributes, key string) (bool, error) {
	ans, err := m.d.call(ctx, h, seen, seen.Object, true)
	if err != nil {
		return false, err
	}
	for k, v := range ans.auditAnnotations {
		m.rec.annotate(h.name+"/"+k, v)
	}
	m.rec.warn(ans.warnings)
	if !ans.allowed {
		return false, denied(h.name, ans.result)
	}
	patched, patch, err := applyPatch(h, seen.Object, ans)
	if err != nil || patched == nil {
		return false, err
	}
	// As kube, once the patch applies, whether or not it changed the
	// object and before converting it back.
	m.annotatePatch(h, key, patch)
	if patched, err = m.a.ConvertTo(patched, schema.GroupVersionKind(m.a.Request.Kind)); err != nil {
		return false, err
	}
	changed := !equality.Semantic.DeepEqual(m.obj.Object, patched.Object)
	m.obj = patched
	return changed, nil
}

// applyPatch returns obj with ans's patch applied and the patch decoded,
// nil when there is no patch.
func applyPatch(h *hook, obj *unstructured.Unstructured, ans *answer) (*unstructured.Unstructured, jsonpatch.Patch, error) {
	if len(ans.patch) == 0 {
		return nil, nil, nil
	}
	p, err := jsonpatch.DecodePatch(ans.patch)
	if err != nil {
		return nil, nil, &callError{webhook: h.name, reason: fmt.Errorf("received undecodable patch in webhook response: %w", err)}
	}
	if len(p) == 0 {
		return nil, nil, nil
	}
	if obj == nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("admission webhook %q attempted to modify the object, which is not supported for this operation", h.name))
	}
	if ans.patchType != admissionv1.PatchTypeJSONPatch {
		return nil, nil, &callError{webhook: h.name, reason: fmt.Errorf("unsupported patch type %q", ans.patchType)}
	}
	js, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("encoding the object to patch: %w", err))
	}
	patched, err := p.Apply(js)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(patched); err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	return out, p, nil
}

// annotateMutation records, as kube does, which webhook was called in
// which round and whether it changed the object.
func (m *mutation) annotateMutation(h *hook, key string, changed bool) {
	v, err := json.Marshal(struct {
		Configuration string `json:"configuration"`
		Webhook       string `json:"webhook"`
		Mutated       bool   `json:"mutated"`
	}{h.configuration, h.name, changed})
	if err != nil {
		return
	}
	m.rec.annotate(mutationAnnotationPrefix+key, string(v))
}

// annotatePatch records the JSON patch h applied, in kube's form: the
// decoded operations re-encoded, so their fields come in sorted order.
func (m *mutation) annotatePatch(h *hook, key string, patch jsonpatch.Patch) {
	v, err := json.Marshal(struct {
		Configuration string          `json:"configuration"`
		Webhook       string          `json:"webhook"`
		Patch         jsonpatch.Patch `json:"patch,omitempty"`
		PatchType     string          `json:"patchType,omitempty"`
	}{h.configuration, h.name, patch, string(admissionv1.PatchTypeJSONPatch)})
	if err != nil {
		return
	}
	m.rec.annotate(auditannotation.PatchPrefix+key, string(v))
}
