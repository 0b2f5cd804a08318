package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"kplane.dev/services/admission/internal/review"
)

// callError is a webhook that could not be asked or gave no usable
// answer; its failurePolicy decides whether the write goes on. Its text
// is kube's ErrCallingWebhook's.
type callError struct {
	webhook string
	reason  error
}

func (e *callError) Error() string {
	return fmt.Sprintf("failed calling webhook %q: %v", e.webhook, e.reason)
}

func (e *callError) Unwrap() error { return e.reason }

// answer is a webhook's verified response, whatever review version it
// came in.
type answer struct {
	allowed          bool
	result           *metav1.Status
	patch            []byte
	patchType        admissionv1.PatchType
	warnings         []string
	auditAnnotations map[string]string
}

// denied is kube's refusal for a webhook that did not allow a write: the
// webhook's status with its message prefixed, never below 400.
func denied(webhook string, result *metav1.Status) *apierrors.StatusError {
	deniedBy := fmt.Sprintf("admission webhook %q denied the request", webhook)
	s := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		s = *result.DeepCopy()
	}
	if s.Code < http.StatusBadRequest {
		s.Code = http.StatusBadRequest
	}
	if s.Status == "" || s.Status == metav1.StatusSuccess {
		s.Status = metav1.StatusFailure
	}
	switch {
	case s.Message != "":
		s.Message = fmt.Sprintf("%s: %s", deniedBy, s.Message)
	case s.Reason != "":
		s.Message = fmt.Sprintf("%s: %s", deniedBy, s.Reason)
	default:
		s.Message = deniedBy + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: s}
}

// call asks h about a with obj as the object, and returns its answer, a
// *callError, or a status error that no failurePolicy overrides.
func (d *Dispatcher) call(ctx context.Context, h *hook, a *review.Attributes, obj *unstructured.Unstructured, mutating bool) (*answer, error) {
	start := time.Now()
	typ := "validate"
	if mutating {
		typ = "admit"
	}
	ctx, span := d.cfg.Tracing.Start(ctx, scope, "webhook "+h.name, trace.WithAttributes(
		attribute.String("kplane.admission.webhook", h.name),
		attribute.String("kplane.admission.type", typ),
		attribute.String("kplane.admission.operation", string(a.Request.Operation)),
	))
	ans, err := d.callOnce(ctx, h, a, obj, mutating)
	if span.IsRecording() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(attribute.Bool("kplane.admission.allowed", ans.allowed))
		}
	}
	span.End()
	d.metrics.observe(h.name, typ, string(a.Request.Operation), time.Since(start), ans, err)
	return ans, err
}

// scope is the instrumentation scope of the webhook calls' spans.
const scope = "kplane.dev/services/admission/internal/webhook"

func (d *Dispatcher) callOnce(ctx context.Context, h *hook, a *review.Attributes, obj *unstructured.Unstructured, mutating bool) (*answer, error) {
	if a.Request.DryRun != nil && *a.Request.DryRun {
		if h.sideEffects == nil {
			return nil, &callError{webhook: h.name, reason: errors.New("Webhook SideEffects is nil")}
		}
		if se := *h.sideEffects; se != admissionregistrationv1.SideEffectClassNone && se != admissionregistrationv1.SideEffectClassNoneOnDryRun {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.name))
		}
	}
	uid := uuid.NewUUID()
	version, body, err := encodeReview(h.reviewVersions, uid, a, obj)
	if err != nil {
		return nil, &callError{webhook: h.name, reason: fmt.Errorf("could not create admission objects: %w", err)}
	}
	t, err := webhookTarget(h.clientConfig)
	if err != nil {
		return nil, &callError{webhook: h.name, reason: fmt.Errorf("could not get REST client: %w", err)}
	}
	c, err := d.clients.get(h.clientConfig, t)
	if err != nil {
		return nil, &callError{webhook: h.name, reason: fmt.Errorf("could not get REST client: %w", err)}
	}
	timeout := defaultTimeout
	if h.timeoutSeconds != nil {
		timeout = time.Duration(*h.timeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	data, err := c.post(ctx, t, body)
	if err != nil {
		return nil, &callError{webhook: h.name, reason: fmt.Errorf("failed to call webhook: %w", err)}
	}
	ans, err := verify(version, uid, data, mutating)
	if err != nil {
		return nil, &callError{webhook: h.name, reason: fmt.Errorf("received invalid webhook response: %w", err)}
	}
	return ans, nil
}

// encodeReview encodes the AdmissionReview of the first version h accepts, as
// kube does, each call with its own uid so that a webhook can tell a
// reinvocation from a retry.
func encodeReview(versions []string, uid types.UID, a *review.Attributes, obj *unstructured.Unstructured) (string, []byte, error) {
	req := a.Request.DeepCopy()
	req.UID = uid
	req.Object, req.OldObject = runtime.RawExtension{}, runtime.RawExtension{}
	if obj != nil {
		raw, err := json.Marshal(obj.Object)
		if err != nil {
			return "", nil, fmt.Errorf("encoding the object: %w", err)
		}
		req.Object.Raw = raw
	}
	if a.OldObject != nil {
		raw, err := json.Marshal(a.OldObject.Object)
		if err != nil {
			return "", nil, fmt.Errorf("encoding the old object: %w", err)
		}
		req.OldObject.Raw = raw
	}
	for _, v := range versions {
		switch v {
		case admissionv1.SchemeGroupVersion.Version:
			body, err := json.Marshal(&admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
				Request:  req,
			})
			return v, body, err
		case admissionv1beta1.SchemeGroupVersion.Version:
			// v1beta1's request has v1's fields and JSON names.
			raw, err := json.Marshal(req)
			if err != nil {
				return "", nil, err
			}
			var old admissionv1beta1.AdmissionRequest
			if err := json.Unmarshal(raw, &old); err != nil {
				return "", nil, err
			}
			body, err := json.Marshal(&admissionv1beta1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: admissionv1beta1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
				Request:  &old,
			})
			return v, body, err
		}
	}
	return "", nil, errors.New("webhook does not accept known AdmissionReview versions (v1, v1beta1)")
}

// verify reads a webhook's AdmissionReview with kube's checks: v1 must
// echo the uid and its own apiVersion and kind, and name a patch's type.
func verify(version string, uid types.UID, data []byte, mutating bool) (*answer, error) {
	if version == admissionv1beta1.SchemeGroupVersion.Version {
		var r admissionv1beta1.AdmissionReview
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("decoding the AdmissionReview: %w", err)
		}
		if r.Response == nil {
			return nil, errors.New("webhook response was absent")
		}
		ans := &answer{allowed: r.Response.Allowed, result: r.Response.Result, warnings: r.Response.Warnings, auditAnnotations: r.Response.AuditAnnotations}
		// v1beta1 allows only JSON patches and does not require naming them.
		if mutating && len(r.Response.Patch) > 0 {
			ans.patch, ans.patchType = r.Response.Patch, admissionv1.PatchTypeJSONPatch
		}
		return ans, nil
	}
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if r.Response == nil {
		return nil, errors.New("webhook response was absent")
	}
	if r.Response.UID != uid {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, r.Response.UID)
	}
	want := admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
	if got := r.GroupVersionKind(); got != want {
		return nil, fmt.Errorf("expected webhook response of %v, got %v", want.String(), got.String())
	}
	ans := &answer{allowed: r.Response.Allowed, result: r.Response.Result, warnings: r.Response.Warnings, auditAnnotations: r.Response.AuditAnnotations}
	if !mutating {
		if len(r.Response.Patch) > 0 {
			return nil, errors.New("validating webhook may not return response.patch")
		}
		if r.Response.PatchType != nil {
			return nil, errors.New("validating webhook may not return response.patchType")
		}
		return ans, nil
	}
	if len(r.Response.Patch) > 0 && r.Response.PatchType == nil {
		return nil, errors.New("webhook returned response.patch but not response.patchType")
	}
	if len(r.Response.Patch) == 0 && r.Response.PatchType != nil {
		return nil, errors.New("webhook returned response.patchType but not response.patch")
	}
	ans.patch = r.Response.Patch
	if r.Response.PatchType != nil {
		ans.patchType = *r.Response.PatchType
		if ans.patchType == "" {
			return nil, fmt.Errorf("webhook returned invalid response.patchType of %q", ans.patchType)
		}
	}
	return ans, nil
}
