package rest

import (
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/requestinfo"
)

// route refuses the path shapes kube-apiserver has no route for, with the
// answer its router gives: 404 for a cluster-scoped resource under
// /namespaces/<ns>/, a namespaced object or subresource addressed without
// its namespace, a watch of a subresource, empty or extra segments; 405
// for a write to the collection of every namespace, which kube serves
// only to read. Request info fills its fields from any such path, and
// the gateway authorizes what they say; serving such a path by those
// fields would serve something else than what was authorized, such as
// every namespace to a user allowed to list "namespaces" in one.
func (h *Handler) route(info *requestinfo.Info) error {
	parts := info.Parts
	if len(parts) == 0 || len(parts) > 3 || slices.Contains(parts, "") {
		return apistatus.NoRoute()
	}
	if info.WatchPath && len(parts) > 2 {
		return apistatus.NoRoute()
	}
	if !h.r.Namespaced {
		if info.InNamespace {
			return apistatus.NoRoute()
		}
		return nil
	}
	if info.InNamespace {
		if info.Namespace == "" {
			return apistatus.NoRoute()
		}
		return nil
	}
	if len(parts) > 1 {
		return apistatus.NoRoute()
	}
	if info.Verb != "list" && info.Verb != "watch" {
		return apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "", 0, false)
	}
	return nil
}
