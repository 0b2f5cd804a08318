package rest

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/storage"
)

// get answers GET of one object (or its /status), reading the revision
// ?resourceVersion asks for.
func (h *Handler) get(c echo.Context, info *requestinfo.Info) error {
	out, err := negotiate(c.Request(), false, h.offers)
	if err != nil {
		return err
	}
	var opts metav1.GetOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(c.QueryParams(), metav1.SchemeGroupVersion, &opts); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	// The object as stored is only encoded: the store's own will do.
	stored := out.as == nil && !out.yaml && !out.pretty
	obj, err := h.store.Get(c.Request().Context(), h.keys.Object(info.Namespace, info.Name), storage.GetOptions{ResourceVersion: opts.ResourceVersion, Shared: stored})
	if err != nil {
		return apistatus.FromStorage(err, h.r.GroupResource(), info.Name)
	}
	if stored {
		return h.writeStored(c, obj, out)
	}
	return h.respond(c, http.StatusOK, obj, out)
}

// list answers GET of a collection: one namespace, or all of them.
func (h *Handler) list(c echo.Context, info *requestinfo.Info) error {
	out, err := negotiate(c.Request(), false, h.offers)
	if err != nil {
		return err
	}
	opts, err := h.listOptions(c.QueryParams(), info)
	if err != nil {
		return err
	}
	res, err := h.store.List(c.Request().Context(), h.collectionPrefix(info), storage.ListOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: opts.ResourceVersionMatch,
		Limit:                opts.Limit,
		Continue:             opts.Continue,
		Predicate:            h.predicate(opts),
		// The items are set into the list and encoded, never changed.
		Shared: true,
	})
	if err != nil {
		return apistatus.FromStorage(err, h.r.GroupResource(), "")
	}
	list := h.r.Objects.NewList()
	if err := meta.SetList(list, res.Items); err != nil {
		return fmt.Errorf("fill %s: %w", h.r.ListKindName(), err)
	}
	li, err := meta.ListAccessor(list)
	if err != nil {
		return fmt.Errorf("read list metadata of %s: %w", h.r.ListKindName(), err)
	}
	li.SetResourceVersion(strconv.FormatInt(res.ResourceVersion, 10))
	li.SetContinue(res.Continue)
	li.SetRemainingItemCount(res.RemainingItemCount)
	return h.respond(c, http.StatusOK, list, out)
}
