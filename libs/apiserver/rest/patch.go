package rest

import (
	"context"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/requestinfo"
)

// patchType reads the patch format from the Content-Type, before
// anything else as kube, so a bad one is a 415 even for a missing object.
func (h *Handler) patchType(c echo.Context) (types.PatchType, error) {
	accepted := h.patcher.PatchTypes()
	mt, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err == nil {
		for _, t := range accepted {
			if t == mt {
				return types.PatchType(mt), nil
			}
		}
	}
	return "", unsupportedMediaType(accepted)
}

func (h *Handler) patch(c echo.Context, info *requestinfo.Info) error {
	pr, err := h.readPatch(c, info, info.Subresource)
	if err != nil {
		return err
	}
	body, opts, popts, warn := pr.body, pr.opts, pr.popts, pr.warn
	w := write{
		namespace:   info.Namespace,
		name:        info.Name,
		subresource: info.Subresource,
		manager:     patch.ManagerName(opts.FieldManager, c.Request().UserAgent()),
		dryRun:      isDryRun(opts.DryRun),
		allowCreate: body.Type == types.ApplyPatchType,
		patched:     true,
		options:     opts,
	}
	patched := func(ctx context.Context, existing runtime.Object) (runtime.Object, error) {
		obj, err := h.patcher.Patch(ctx, existing, body, popts)
		if strictErr, ok := runtime.AsStrictDecodingError(err); ok && obj != nil {
			// Patch reports unknown and duplicate fields this way only
			// under Warn.
			for _, e := range strictErr.Errors() {
				for _, m := range yamlWarnings(e.Error()) {
					warn.add(m)
				}
			}
			return obj, nil
		}
		return obj, err
	}
	out, created, err := h.updateObject(c.Request().Context(), w, patched, patched)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return h.writeObject(c, code, out)
}

// patchRequest is what a PATCH says: its body (which knows its type) and
// options, and the warnings of its answer.
type patchRequest struct {
	body  *patch.Body
	opts  *metav1.PatchOptions
	popts patch.Options
	warn  *warnings
}

// readPatch reads and checks a PATCH of subresource ("" for the main
// resource) as kube does: its media type, options and body.
func (h *Handler) readPatch(c echo.Context, info *requestinfo.Info, subresource string) (*patchRequest, error) {
	pt, err := h.patchType(c)
	if err != nil {
		return nil, err
	}
	opts := &metav1.PatchOptions{}
	if err := decodeOptions(c, opts, "PatchOptions", func() field.ErrorList { return metavalidation.ValidatePatchOptions(opts, pt) }); err != nil {
		return nil, err
	}
	raw, err := readBody(c)
	if err != nil {
		return nil, err
	}
	// A body that is not even well-formed in its format is refused before
	// anything is read from storage, as kube does.
	body, err := patch.NewBody(pt, raw)
	if err != nil {
		return nil, err
	}
	return &patchRequest{
		body: body,
		opts: opts,
		popts: patch.Options{
			Name:            info.Name,
			Namespace:       info.Namespace,
			FieldManager:    opts.FieldManager,
			UserAgent:       c.Request().UserAgent(),
			Force:           opts.Force != nil && *opts.Force,
			Subresource:     subresource,
			FieldValidation: fieldValidation(opts.FieldValidation),
		},
		warn: newWarnings(c),
	}, nil
}
