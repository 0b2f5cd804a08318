package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	authnproto "kplane.dev/proto/authn"
	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/serviceaccount"
)

// Lifetimes of requested tokens, kube's.
const (
	defaultExpirationSeconds = 60 * 60
	minExpirationSeconds     = 10 * 60
	// warnOnlyExpirationSeconds is what kubelet asks for pod tokens; kube
	// gives such tokens extendedExpirationSeconds and records when
	// clients should have refreshed them, so old clients keep working.
	warnOnlyExpirationSeconds = 3607
	extendedExpirationSeconds = 24 * 365 * 60 * 60
)

var tokenRequestKind = schema.GroupKind{Group: "authentication.k8s.io", Kind: "TokenRequest"}

// serveTokenRequest answers proto/authn.SubjectTokenRequest as kube's
// serviceaccounts/token REST does once the service account and bound
// object have been read (core reads them and sends what it read).
func (s *Server) serveTokenRequest(_ context.Context, payload []byte) ([]byte, error) {
	out, err := s.tokenRequest(payload)
	switch {
	case err == nil:
		s.metrics.tokenRequests.WithLabelValues("issued").Inc()
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		s.metrics.tokenRequests.WithLabelValues("invalid").Inc()
	default:
		s.metrics.tokenRequests.WithLabelValues(resultError).Inc()
	}
	return out, err
}

func (s *Server) tokenRequest(payload []byte) ([]byte, error) {
	var in authnproto.TokenRequest
	if err := json.Unmarshal(payload, &in); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode token request: %v", err))
	}
	var req authenticationv1.TokenRequest
	if len(in.Request) > 0 {
		if err := json.Unmarshal(in.Request, &req); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decode TokenRequest: %v", err))
		}
	}
	name, namespace := in.ServiceAccountName, in.Namespace
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(tokenRequestKind, name, field.ErrorList{
			field.Invalid(field.NewPath("metadata").Child("name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return nil, apierrors.NewInvalid(tokenRequestKind, name, field.ErrorList{
			field.Invalid(field.NewPath("metadata").Child("namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = append([]string(nil), s.cfg.apiAuds...)
	}
	if req.Spec.ExpirationSeconds == nil {
		exp := int64(defaultExpirationSeconds)
		req.Spec.ExpirationSeconds = &exp
	}
	req.Name, req.Namespace = name, namespace
	// The time is taken before signing, so the expiry reported is never
	// after the token's exp.
	now := s.clock.Now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}

	var errs field.ErrorList
	expPath := field.NewPath("spec", "expirationSeconds")
	if *req.Spec.ExpirationSeconds < minExpirationSeconds {
		errs = append(errs, field.Invalid(expPath, *req.Spec.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
	}
	if *req.Spec.ExpirationSeconds > maxTokenSeconds {
		errs = append(errs, field.Invalid(expPath, *req.Spec.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestKind, "", errs)
	}

	binding, err := bindingOf(&req, &in)
	if err != nil {
		return nil, err
	}
	if max := int64(s.cfg.maxExpiration / time.Second); max > 0 && *req.Spec.ExpirationSeconds > max {
		*req.Spec.ExpirationSeconds = max
	}
	exp, warnAfter := *req.Spec.ExpirationSeconds, int64(0)
	if s.cfg.extendExpiration && binding.Pod != nil && exp == warnOnlyExpirationSeconds && s.onlyAPIAudiences(req.Spec.Audiences) {
		warnAfter, exp = exp, extendedExpirationSeconds
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(in.ServiceAccountUID)}}
	claims, err := serviceaccount.BoundClaims(now, sa, binding, req.Spec.Audiences, time.Duration(exp)*time.Second, string(uuid.NewUUID()))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if warnAfter > 0 {
		claims.Kubernetes.WarnAfter = jwt.NewNumericDate(now.Add(time.Duration(warnAfter) * time.Second))
	}
	token, err := s.cfg.signer.Sign(claims)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := req.DeepCopy()
	out.APIVersion, out.Kind = "authentication.k8s.io/v1", "TokenRequest"
	out.Status = authenticationv1.TokenRequestStatus{
		Token:               token,
		ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(*out.Spec.ExpirationSeconds) * time.Second)),
	}
	return json.Marshal(out)
}

// onlyAPIAudiences reports whether every audience asked for is one of the
// API's: only tokens for kplane itself get the extended lifetime.
func (s *Server) onlyAPIAudiences(auds []string) bool {
	return len(authenticator.Audiences(auds).Intersect(s.cfg.apiAuds)) == len(auds)
}

// bindingOf is the object the token is bound to, as core read it.
func bindingOf(req *authenticationv1.TokenRequest, in *authnproto.TokenRequest) (serviceaccount.Binding, error) {
	var b serviceaccount.Binding
	ref := req.Spec.BoundObjectRef
	if ref == nil {
		return b, nil
	}
	obj := in.BoundObject
	if obj == nil {
		return b, apierrors.NewBadRequest("spec.boundObjectRef is set but the bound object was not read")
	}
	meta := metav1.ObjectMeta{Name: obj.Name, Namespace: in.Namespace, UID: types.UID(obj.UID)}
	switch obj.Kind {
	case "Pod":
		b.Pod = &corev1.Pod{ObjectMeta: meta}
		if in.NodeName != "" {
			b.Node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.NodeName, UID: types.UID(in.NodeUID)}}
		}
	case "Secret":
		b.Secret = &corev1.Secret{ObjectMeta: meta}
	case "Node":
		meta.Namespace = ""
		b.Node = &corev1.Node{ObjectMeta: meta}
	default:
		return b, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to object of gvk %q",
			in.ServiceAccountName, schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).String()))
	}
	if ref.UID != "" && string(ref.UID) != obj.UID {
		return b, apierrors.NewConflict(schema.GroupResource{Resource: "serviceaccounts/token"}, in.ServiceAccountName,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return b, nil
}
