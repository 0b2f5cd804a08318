package rest

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/resource"
)

// checkUnstored refuses a resource that is not stored yet declares verbs
// other than create: nothing could serve them.
func checkUnstored(r *resource.Resource) error {
	if r.Stored() {
		return nil
	}
	if !slices.Equal(r.VerbList(), []string{"create"}) {
		return fmt.Errorf("resource %s is not stored and must declare the verbs [create], got %v", r.GroupVersionResource, r.VerbList())
	}
	if r.Subresources.Status || r.Subresources.Finalize || r.Subresources.Scale != nil || len(r.Subresources.Actions) != 0 {
		return fmt.Errorf("resource %s is not stored and can have no subresources", r.GroupVersionResource)
	}
	return nil
}

// actionHandlers are the handlers of r's actions: each decodes and
// answers its own kind, in r's scope.
func actionHandlers(parent *Handler) (map[string]*Handler, error) {
	r := parent.r
	out := map[string]*Handler{}
	for _, a := range r.Subresources.Actions {
		switch {
		case a.Name == "" || a.Name == "status" || a.Name == "finalize" || a.Name == scaleSubresource:
			return nil, fmt.Errorf("resource %s: action name %q is empty or reserved", r.GroupVersionResource, a.Name)
		case a.Objects == nil || a.Creater == nil || a.Kind.Kind == "":
			return nil, fmt.Errorf("resource %s: action %q needs a kind, Objects and a Creater", r.GroupVersionResource, a.Name)
		case out[a.Name] != nil:
			return nil, fmt.Errorf("resource %s: action %q is declared twice", r.GroupVersionResource, a.Name)
		}
		sub := &resource.Resource{
			GroupVersionResource: a.Kind.GroupVersion().WithResource(r.GroupVersionResource.Resource),
			Kind:                 a.Kind.Kind,
			Namespaced:           r.Namespaced,
			Verbs:                []string{"create"},
			Objects:              a.Objects,
			Creater:              a.Creater,
		}
		out[a.Name] = &Handler{r: sub, clock: parent.clock, log: parent.log, watchTimeout: parent.watchTimeout, offers: offerOf(sub)}
	}
	return out, nil
}

// createUnstored answers a create of a resource or action that is not
// stored: the decoded body goes to its Creater, whose answer is the
// response, 201 Created as kube's reviews and TokenRequest.
func (h *Handler) createUnstored(c echo.Context, info *requestinfo.Info) error {
	if err := h.acceptable(c, "create"); err != nil {
		return err
	}
	opts := &metav1.CreateOptions{}
	if err := decodeOptions(c, opts, "CreateOptions", func() field.ErrorList { return metavalidation.ValidateCreateOptions(opts) }); err != nil {
		return err
	}
	obj, _, err := h.decodeObject(c, info, opts.FieldValidation)
	if err != nil {
		return err
	}
	out, err := h.r.Creater.Create(c.Request().Context(), &resource.CreateRequest{
		Namespace: info.Namespace,
		Name:      info.Name,
		Object:    obj,
		DryRun:    isDryRun(opts.DryRun),
	})
	if err != nil {
		return err
	}
	return h.writeObject(c, http.StatusCreated, out)
}
