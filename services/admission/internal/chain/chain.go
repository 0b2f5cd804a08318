package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/tracing"
	"kplane.dev/proto/admission"
	"kplane.dev/services/admission/internal/review"
)

// Mutator is a step of the mutating phase.
type Mutator interface {
	Mutate(ctx context.Context, a *review.Attributes) (*review.Result, error)
}

// Validator is a step of the validating phase.
type Validator interface {
	Validate(ctx context.Context, a *review.Attributes) (*review.Result, error)
}

// ScopedMutator is a Mutator that can tell, from a write's resource,
// subresource and operation alone, that it would not act on it.
type ScopedMutator interface {
	MayMutate(a *review.Attributes) bool
}

// ScopedValidator is a Validator that can tell, from a write's resource,
// subresource and operation alone, that it would not act on it.
type ScopedValidator interface {
	MayValidate(a *review.Attributes) bool
}

// Config is what a Chain runs.
type Config struct {
	// Synced says whether the configuration has been read.
	Synced func() bool
	// StartUsers are the users whose writes are admitted unasked until
	// the configuration has been read, when they are in system:masters:
	// the other services' own.
	StartUsers []string
	// Mutators run in order, each on the object the one before left.
	Mutators []Mutator
	// Validators run in order; the first refusal ends the phase.
	Validators []Validator
	// Converters convert a write's objects to its equivalents; without
	// them a step that matches an equivalent fails the write.
	Converters Converters
	// Tracing, when not nil, spans each step.
	Tracing *tracing.Provider
}

// Converters make the converter of a review's objects, nil when it has no
// equivalents.
type Converters interface {
	For(r *admission.Review) (review.Converter, error)
}

// mastersGroup is the group every start user must be in.
const mastersGroup = "system:masters"

// Chain runs the phases. It is safe for concurrent use.
type Chain struct {
	synced     func() bool
	startUsers map[string]bool
	mutators   []Mutator
	validators []Validator
	converters Converters
	tracing    *tracing.Provider
}

// New makes a Chain.
func New(cfg Config) (*Chain, error) {
	if cfg.Synced == nil {
		return nil, errors.New("admission chain: no Synced")
	}
	c := &Chain{synced: cfg.Synced, startUsers: map[string]bool{}, mutators: cfg.Mutators, validators: cfg.Validators, converters: cfg.Converters, tracing: cfg.Tracing}
	for _, u := range cfg.StartUsers {
		c.startUsers[u] = true
	}
	return c, nil
}

// Mutate runs the mutating phase of r.
func (c *Chain) Mutate(ctx context.Context, r *admission.Review) (*admission.Verdict, error) {
	if v := c.unsynced(r); v != nil {
		return v, nil
	}
	a, err := c.attributes(r)
	if err != nil {
		return nil, err
	}
	var (
		warnings    []string
		annotations map[string]string
		changed     bool
	)
	for _, m := range c.mutators {
		ctx, span := c.startStep(ctx, "mutate", m)
		res, err := m.Mutate(ctx, a)
		endStep(span, err)
		if res != nil {
			warnings = append(warnings, res.Warnings...)
			annotations = merge(annotations, res.AuditAnnotations)
		}
		if err != nil {
			return refusal(err, warnings, annotations)
		}
		if res.Object != nil {
			a = a.WithObject(res.Object)
			changed = true
		}
	}
	v := &admission.Verdict{Allowed: true, Warnings: warnings, AuditAnnotations: annotations, Idle: c.mutateIdle(a)}
	if changed && a.Object != nil {
		if v.Object.Raw, err = json.Marshal(a.Object); err != nil {
			return nil, fmt.Errorf("encode the mutated object: %w", err)
		}
	}
	return v, nil
}

// Validate runs the validating phase of r.
func (c *Chain) Validate(ctx context.Context, r *admission.Review) (*admission.Verdict, error) {
	if v := c.unsynced(r); v != nil {
		return v, nil
	}
	a, err := c.attributes(r)
	if err != nil {
		return nil, err
	}
	var (
		warnings    []string
		annotations map[string]string
	)
	for _, s := range c.validators {
		// A step that refuses may still have warned.
		ctx, span := c.startStep(ctx, "validate", s)
		res, err := s.Validate(ctx, a)
		endStep(span, err)
		if res != nil {
			warnings = append(warnings, res.Warnings...)
			annotations = merge(annotations, res.AuditAnnotations)
		}
		if err != nil {
			return refusal(err, warnings, annotations)
		}
	}
	return &admission.Verdict{Allowed: true, Warnings: warnings, AuditAnnotations: annotations, Idle: c.validateIdle(a)}, nil
}

// mutateIdle says whether no mutator could act on writes like a.
func (c *Chain) mutateIdle(a *review.Attributes) bool {
	for _, m := range c.mutators {
		if s, ok := m.(ScopedMutator); !ok || s.MayMutate(a) {
			return false
		}
	}
	return true
}

// validateIdle says whether no validator could act on writes like a.
func (c *Chain) validateIdle(a *review.Attributes) bool {
	for _, v := range c.validators {
		if s, ok := v.(ScopedValidator); !ok || s.MayValidate(a) {
			return false
		}
	}
	return true
}

// unsynced is the verdict on r before the configuration has been read,
// or nil once it has.
func (c *Chain) unsynced(r *admission.Review) *admission.Verdict {
	if c.synced() {
		return nil
	}
	// A start user must also be in system:masters, as the services'
	// identities are: a name alone could be claimed through an
	// authenticator that passes names through unprefixed, and a member
	// of system:masters may do anything anyway.
	u := r.Request.UserInfo
	if c.startUsers[u.Username] && slices.Contains(u.Groups, mastersGroup) {
		return &admission.Verdict{Allowed: true}
	}
	return &admission.Verdict{Unsynced: true}
}

// refusal is the verdict of a step's error: a status error refuses the
// write as it says; any other is the chain failing, which the requester
// turns into a failed write.
func refusal(err error, warnings []string, annotations map[string]string) (*admission.Verdict, error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return nil, err
	}
	status := st.Status()
	return &admission.Verdict{Allowed: false, Status: &status, Warnings: warnings, AuditAnnotations: annotations}, nil
}

// merge adds b's annotations to a's, the first value of a key winning as
// in kube's audit.
func merge(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	if a == nil {
		a = make(map[string]string, len(b))
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			a[k] = v
		}
	}
	return a
}

// attributes decodes the objects of r once for every step.
func (c *Chain) attributes(r *admission.Review) (*review.Attributes, error) {
	var objs [2]*unstructured.Unstructured
	for i, raw := range [][]byte{r.Request.Object.Raw, r.Request.OldObject.Raw} {
		if len(raw) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("decode the object under review: %w", err)
		}
		objs[i] = u
	}
	var (
		equivalents []review.Target
		conv        review.Converter
	)
	if len(r.Equivalents) > 0 && c.converters != nil {
		for _, e := range r.Equivalents {
			equivalents = append(equivalents, review.Target{Resource: schema.GroupVersionResource(e.Resource), Kind: schema.GroupVersionKind(e.Kind)})
		}
		var err error
		if conv, err = c.converters.For(r); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	return review.New(&r.Request, objs[0], objs[1], equivalents, conv), nil
}

// scope is the instrumentation scope of the steps' spans.
const scope = "kplane.dev/services/admission/internal/chain"

// startStep starts the span of one step of phase; the step is named by
// its type (the policies, the webhooks, the Rego policies).
func (c *Chain) startStep(ctx context.Context, phase string, step any) (context.Context, trace.Span) {
	if !c.tracing.Enabled() {
		// A span that does nothing; ending it leaves ctx's own alone.
		return ctx, trace.SpanFromContext(context.Background())
	}
	name := fmt.Sprintf("%T", step)
	return c.tracing.Start(ctx, scope, phase+" "+name, trace.WithAttributes(
		attribute.String("kplane.admission.phase", phase),
		attribute.String("kplane.admission.step", name)))
}

// endStep ends a step's span, failed when the step refused the write or
// could not decide.
func endStep(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
