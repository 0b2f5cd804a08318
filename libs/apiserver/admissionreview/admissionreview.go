package admissionreview

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/warning"

	"kplane.dev/libs/apiserver/auditannotation"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/proto/admission"
)

// DefaultTimeout bounds one phase: a webhook may take up to 30 s, and a
// phase may call several in order.
const DefaultTimeout = 2 * time.Minute

// Admission asks the admission service about every write, except those
// the service said no step could act on, for admission.IdleFor.
type Admission struct {
	conn    *nats.Conn
	timeout time.Duration
	// observer is nil when the phases report nothing.
	observer *natsrpc.Observer
	// idle holds, by idleKey, when each Idle verdict stops counting.
	idle sync.Map
	now  func() time.Time
}

// idleKey is what an Idle verdict is about: a phase of the writes of one
// resource, subresource and operation.
type idleKey struct {
	subject     string
	resource    schema.GroupVersionResource
	subresource string
	operation   rest.Operation
}

var (
	_ rest.MutatingAdmission   = (*Admission)(nil)
	_ rest.ValidatingAdmission = (*Admission)(nil)
)

// unsyncedAttempts bounds how often a phase is asked when the replicas
// answering have not read their configuration: with one replica of two
// still starting, three asks all meet it one time in eight; a write at
// the start of the whole system fails soon rather than waiting out its
// timeout.
const unsyncedAttempts = 3

// Option adjusts an Admission.
type Option func(*Admission)

// WithClock sets what tells the time Idle verdicts are measured by.
func WithClock(now func() time.Time) Option { return func(a *Admission) { a.now = now } }

// WithObserver makes the phases asked report to o.
func WithObserver(o *natsrpc.Observer) Option { return func(a *Admission) { a.observer = o } }

// New asks over nc, waiting up to timeout for each phase.
func New(nc *nats.Conn, timeout time.Duration, opts ...Option) *Admission {
	a := &Admission{conn: nc, timeout: timeout, now: time.Now}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Handles reports that every write goes to admission.
func (a *Admission) Handles(rest.Operation) bool { return true }

// Admit runs the mutating phase and sets the object it leaves.
func (a *Admission) Admit(ctx context.Context, attrs *rest.Attributes) error {
	v, err := a.ask(ctx, admission.SubjectMutate, attrs)
	if err != nil {
		return err
	}
	if len(v.Object.Raw) == 0 || attrs.Object == nil {
		return nil
	}
	obj, err := decodeLike(attrs.Object, v.Object.Raw)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("read the object admission left: %w", err))
	}
	attrs.Object = obj
	return nil
}

// Validate runs the validating phase.
func (a *Admission) Validate(ctx context.Context, attrs *rest.Attributes) error {
	_, err := a.ask(ctx, admission.SubjectValidate, attrs)
	return err
}

// ask sends one phase of a write and returns the verdict when it allows
// the write; warnings reach the client either way.
func (a *Admission) ask(ctx context.Context, subject string, attrs *rest.Attributes) (*admission.Verdict, error) {
	if a.conn == nil {
		return nil, apierrors.NewServiceUnavailable("admission needs NATS, and this service runs without --nats-url")
	}
	key := idleKey{subject: subject, resource: attrs.Resource, subresource: attrs.Subresource, operation: attrs.Operation}
	if until, ok := a.idle.Load(key); ok && a.now().Before(until.(time.Time)) {
		return &admission.Verdict{Allowed: true}, nil
	}
	req, err := request(attrs)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	review := &admission.Review{Request: *req, Equivalents: equivalents(attrs)}
	if len(review.Equivalents) > 0 {
		review.Definition = attrs.Definition
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var v admission.Verdict
	for attempt := 1; ; attempt++ {
		v = admission.Verdict{}
		// A phase is sent again when no replica took it, when the one
		// that took it died before answering, and when it decided
		// nothing. Asking twice may call a webhook twice, which kube's
		// contract for webhooks allows: kube itself admits a write again
		// when it retries it after a conflict and reinvokes mutating
		// webhooks, and asks webhook authors to make them idempotent.
		// Failing the write instead would fail writes every policy
		// passes each time an admission replica is lost.
		if err := natsrpc.RequestJSON(ctx, a.conn, subject, review, &v, natsrpc.Idempotent(), natsrpc.Observe(a.observer)); err != nil {
			if _, ok := err.(apierrors.APIStatus); ok {
				return nil, err
			}
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("admission could not be asked: %v", err))
		}
		if !v.Unsynced {
			break
		}
		if attempt == unsyncedAttempts {
			err := apierrors.NewServiceUnavailable("admission is not ready: it has not yet read the webhook configurations and admission policies")
			err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
			return nil, err
		}
	}
	if v.Idle {
		a.idle.Store(key, a.now().Add(admission.IdleFor))
	}
	for _, w := range v.Warnings {
		warning.AddWarning(ctx, "", w)
	}
	// A refused write is audited with the annotations made before the
	// refusal too, as kube audits it.
	for k, val := range v.AuditAnnotations {
		auditannotation.Add(ctx, k, val)
	}
	if !v.Allowed {
		st := metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: "admission refused the request"}
		if v.Status != nil {
			st = *v.Status
			st.Status = metav1.StatusFailure
		}
		return nil, &apierrors.StatusError{ErrStatus: st}
	}
	return &v, nil
}

// equivalents are the Review's equivalents of a write.
func equivalents(attrs *rest.Attributes) []admission.Equivalent {
	var out []admission.Equivalent
	for _, e := range attrs.Equivalents {
		out = append(out, admission.Equivalent{
			Resource: metav1.GroupVersionResource{Group: e.Resource.Group, Version: e.Resource.Version, Resource: e.Resource.Resource},
			Kind:     metav1.GroupVersionKind{Group: e.Kind.Group, Version: e.Kind.Version, Kind: e.Kind.Kind},
		})
	}
	return out
}

// request is the AdmissionRequest of a write.
func request(attrs *rest.Attributes) (*admissionv1.AdmissionRequest, error) {
	gvk := metav1.GroupVersionKind{Group: attrs.Kind.Group, Version: attrs.Kind.Version, Kind: attrs.Kind.Kind}
	gvr := metav1.GroupVersionResource{Group: attrs.Resource.Group, Version: attrs.Resource.Version, Resource: attrs.Resource.Resource}
	r := &admissionv1.AdmissionRequest{
		UID:                uuid.NewUUID(),
		Kind:               gvk,
		Resource:           gvr,
		SubResource:        attrs.Subresource,
		RequestKind:        &gvk,
		RequestResource:    &gvr,
		RequestSubResource: attrs.Subresource,
		Name:               attrs.Name,
		Namespace:          attrs.Namespace,
		Operation:          admissionv1.Operation(attrs.Operation),
		DryRun:             &attrs.DryRun,
	}
	if attrs.User != nil {
		r.UserInfo = *attrs.User
	}
	for _, f := range []struct {
		obj  runtime.Object
		to   *runtime.RawExtension
		kind bool
	}{{attrs.Object, &r.Object, true}, {attrs.OldObject, &r.OldObject, true}, {attrs.Options, &r.Options, false}} {
		if f.obj == nil || reflect.ValueOf(f.obj).IsNil() {
			continue
		}
		obj := f.obj
		if f.kind && obj.GetObjectKind().GroupVersionKind().Empty() {
			// Typed objects in a server carry no apiVersion and kind; a
			// webhook reads them.
			obj = obj.DeepCopyObject()
			obj.GetObjectKind().SetGroupVersionKind(attrs.Kind)
		}
		raw, err := objects.JSON(obj)
		if err != nil {
			return nil, fmt.Errorf("encode %T for admission: %w", f.obj, err)
		}
		f.to.Raw = raw
	}
	return r, nil
}

// decodeLike reads data into a new object of obj's Go type, keeping its
// apiVersion and kind.
func decodeLike(obj runtime.Object, data []byte) (runtime.Object, error) {
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return out, nil
}
