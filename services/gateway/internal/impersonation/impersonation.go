package impersonation

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/authz"
)

// The impersonation headers.
const (
	UserHeader        = "Impersonate-User"
	GroupHeader       = "Impersonate-Group"
	UIDHeader         = "Impersonate-Uid"
	ExtraHeaderPrefix = "Impersonate-Extra-"

	// headerPrefix starts every impersonation header.
	headerPrefix = "Impersonate-"
)

const (
	allAuthenticated   = "system:authenticated"
	allUnauthenticated = "system:unauthenticated"
	anonymous          = "system:anonymous"
	saPrefix           = "system:serviceaccount:"
	saGroup            = "system:serviceaccounts"
	authenticationAPI  = "authentication.k8s.io"
)

// Authorizer decides whether the requestor may impersonate.
type Authorizer interface {
	Authorize(ctx context.Context, attrs authz.Attributes) (authz.Decision, error)
}

// request is one thing to impersonate, named as kube names it.
type request struct {
	ref corev1.ObjectReference
	// attrs is the check of the impersonate verb on it.
	attrs authz.Attributes
}

// Impersonate returns the user requestor acts as through h's
// impersonation headers, each authorized by a, and removes the headers
// from h; nil when h asks for no impersonation. Errors are API status
// errors: 403 with kube's message for a refusal, 500 for headers kube
// rejects, 503 when authz cannot be asked.
func Impersonate(ctx context.Context, a Authorizer, requestor *frontproxy.User, h http.Header) (*frontproxy.User, error) {
	if !impersonating(h) {
		return nil, nil
	}
	requests, err := requests(requestor, h)
	if err != nil || len(requests) == 0 {
		return nil, err
	}
	groupsSpecified := len(h.Values(GroupHeader)) > 0
	u := &frontproxy.User{}
	var groups []string
	for _, r := range requests {
		switch r.attrs.Resource {
		case "serviceaccounts":
			u.Name = saPrefix + r.ref.Namespace + ":" + r.ref.Name
			if !groupsSpecified {
				// A service account's groups are fixed.
				groups = []string{saGroup, saGroup + ":" + r.ref.Namespace}
			}
		case "users":
			u.Name = r.ref.Name
		case "groups":
			groups = append(groups, r.ref.Name)
		case "userextras":
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[r.ref.FieldPath] = append(u.Extra[r.ref.FieldPath], r.ref.Name)
		case "uids":
			u.UID = r.ref.Name
		}
		d, err := a.Authorize(ctx, r.attrs)
		if err != nil {
			return nil, err
		}
		if !d.Allowed {
			return nil, authz.Forbidden(r.attrs, d.Reason)
		}
	}
	if u.Name != anonymous {
		// Authenticated unless the caller named system:authenticated or
		// system:unauthenticated itself.
		if !slices.Contains(groups, allAuthenticated) && !slices.Contains(groups, allUnauthenticated) {
			groups = append(groups, allAuthenticated)
		}
	} else if !slices.Contains(groups, allUnauthenticated) {
		groups = append(groups, allUnauthenticated)
	}
	u.Groups = groups
	Strip(h)
	return u, nil
}

// Strip removes the impersonation headers from h.
func Strip(h http.Header) {
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), "impersonate-") {
			delete(h, name)
		}
	}
}

// impersonating reports whether h has a header of impersonation, which
// all start with headerPrefix. Most requests have none, and reading every
// header as one (lowercased, which copies it) was 2.5% of the gateway's
// CPU under gets.
func impersonating(h http.Header) bool {
	for k := range h {
		if len(k) >= len(headerPrefix) && strings.EqualFold(k[:len(headerPrefix)], headerPrefix) {
			return true
		}
	}
	return false
}

// requests reads what h asks to impersonate, in kube's order: the user
// (or service account), groups, extras, uid. Groups, extras or a uid
// without a user is kube's internal error.
func requests(requestor *frontproxy.User, h http.Header) ([]request, error) {
	var out []request
	add := func(ref corev1.ObjectReference, group, resource, subresource string) {
		// As kube, the version is the reference's: none for users,
		// groups and service accounts.
		version := ""
		if ref.APIVersion != "" {
			version = "v1"
		}
		out = append(out, request{ref: ref, attrs: authz.Attributes{
			User:            requestor,
			Verb:            "impersonate",
			ResourceRequest: true,
			APIGroup:        group,
			APIVersion:      version,
			Namespace:       ref.Namespace,
			Name:            ref.Name,
			Resource:        resource,
			Subresource:     subresource,
		}})
	}
	name := h.Get(UserHeader)
	hasUser := name != ""
	if hasUser {
		if ns, sa, ok := splitServiceAccount(name); ok {
			add(corev1.ObjectReference{Kind: "ServiceAccount", Namespace: ns, Name: sa}, "", "serviceaccounts", "")
		} else {
			add(corev1.ObjectReference{Kind: "User", Name: name}, "", "users", "")
		}
	}
	groups := h.Values(GroupHeader)
	for _, g := range groups {
		add(corev1.ObjectReference{Kind: "Group", Name: g}, "", "groups", "")
	}
	hasExtra := false
	for header, values := range h {
		lower := strings.ToLower(header)
		if !strings.HasPrefix(lower, strings.ToLower(ExtraHeaderPrefix)) {
			continue
		}
		hasExtra = true
		key := unescape(lower[len(ExtraHeaderPrefix):])
		for _, v := range values {
			add(corev1.ObjectReference{Kind: "UserExtra", APIVersion: "authentication.k8s.io/v1", Name: v, FieldPath: key}, authenticationAPI, "userextras", key)
		}
	}
	uid := h.Get(UIDHeader)
	if uid != "" {
		add(corev1.ObjectReference{Kind: "UID", APIVersion: "authentication.k8s.io/v1", Name: uid}, authenticationAPI, "uids", "")
	}
	if (len(groups) > 0 || hasExtra || uid != "") && !hasUser {
		refs := make([]corev1.ObjectReference, len(out))
		for i, r := range out {
			refs[i] = r.ref
		}
		return nil, apierrors.NewInternalError(fmt.Errorf("requested %v without impersonating a user", refs))
	}
	return out, nil
}

// splitServiceAccount reads system:serviceaccount:<namespace>:<name> as
// kube does: both parts must be valid names.
func splitServiceAccount(user string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(user, saPrefix)
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 2 {
		return "", "", false
	}
	if len(validation.ValidateNamespaceName(parts[0], false)) > 0 || len(validation.ValidateServiceAccountName(parts[1], false)) > 0 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// unescape decodes a percent-encoded extra key; a malformed one is kept
// as sent, as kube keeps it.
func unescape(key string) string {
	if k, err := url.PathUnescape(key); err == nil {
		return k
	}
	return key
}
