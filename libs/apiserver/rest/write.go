package rest

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/warning"
	"sigs.k8s.io/yaml"

	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/resource"
)

// unsupportedMediaType is kube's 415 for a body format it cannot read.
func unsupportedMediaType(accepted []string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %v", strings.Join(accepted, ", ")),
	}}
}

// bodyFormat reads the request's Content-Type, which must be one of
// accepted; an absent one is JSON, as kube.
func bodyFormat(c echo.Context, accepted []string) (resource.DecodeOptions, error) {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if ct == "" {
		return resource.DecodeOptions{}, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && slices.Contains(accepted, mt) {
		return resource.DecodeOptions{YAML: mt == runtime.ContentTypeYAML, Protobuf: mt == runtime.ContentTypeProtobuf}, nil
	}
	return resource.DecodeOptions{}, unsupportedMediaType(accepted)
}

// readBody reads the whole request body. The server's body limit turns an
// oversized body into echo's 413 error, which is returned as is.
func readBody(c echo.Context) ([]byte, error) {
	// The server has read the body already (server.readBody): its bytes
	// are taken, not copied again.
	if b, ok := c.Request().Body.(interface{ ReadRest() []byte }); ok {
		return b.ReadRest(), nil
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	return body, nil
}

// decodeOptions reads a write's options from the query, as kube's
// parameter codec does, and validates them; invalid options are kube's 422
// naming the options kind.
func decodeOptions(c echo.Context, into runtime.Object, kind string, validate func() field.ErrorList) error {
	if err := metainternalscheme.ParameterCodec.DecodeParameters(c.QueryParams(), metav1.SchemeGroupVersion, into); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if errs := validate(); len(errs) != 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return nil
}

// warnings sets a request's Warning response headers as warnings arise,
// so they reach the client on errors too, as kube's warning recorder.
type warnings struct {
	c    echo.Context
	seen map[string]bool
}

func newWarnings(c echo.Context) *warnings { return &warnings{c: c, seen: map[string]bool{}} }

var _ warning.Recorder = (*warnings)(nil)

// AddWarning adds a warning a library reports through the request's
// context; agent is "-" when empty, as kube's recorder.
func (w *warnings) AddWarning(agent, text string) {
	if agent == "" {
		agent = "-"
	}
	if w.seen[text] {
		return
	}
	w.seen[text] = true
	if hv, err := utilnet.NewWarningHeader(299, agent, text); err == nil {
		w.c.Response().Header().Add("Warning", hv)
	}
}

// add sets one Warning header per distinct message in kube's form:
// 299 - "message".
func (w *warnings) add(msg string) { w.AddWarning("-", msg) }

// fieldValidation returns the directive of a write, Warn when unset as
// kube's default.
func fieldValidation(directive string) string {
	if directive == "" {
		return metav1.FieldValidationWarn
	}
	return directive
}

// decodeObject reads and decodes the body of a create or update into an
// object of this resource in the request's namespace.
func (h *Handler) decodeObject(c echo.Context, info *requestinfo.Info, directive string) (runtime.Object, metav1.Object, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, nil, err
	}
	obj, err := h.decodeBody(c, body, fieldValidation(directive), newWarnings(c))
	if err != nil {
		return nil, nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	if err := ensureNamespace(m, info.Namespace); err != nil {
		return nil, nil, err
	}
	return obj, m, nil
}

// decodeBody decodes a create or update body into an object of this
// resource, applying the fieldValidation directive to unknown and
// duplicate fields and checking that the body names this resource's
// apiVersion and kind. Every failure is a 400, never a 500.
func (h *Handler) decodeBody(c echo.Context, body []byte, directive string, warn *warnings) (runtime.Object, error) {
	format, err := bodyFormat(c, h.r.Objects.MediaTypes())
	if err != nil {
		return nil, err
	}
	format.Strict = directive != metav1.FieldValidationIgnore
	obj, err := h.r.Objects.DecodeRequest(body, format)
	if err != nil {
		if strictErr, ok := runtime.AsStrictDecodingError(err); ok && obj != nil && directive == metav1.FieldValidationWarn {
			for _, e := range strictErr.Errors() {
				for _, w := range yamlWarnings(e.Error()) {
					warn.add(w)
				}
			}
		} else {
			return nil, h.decodeError(err, body, format.YAML)
		}
	}
	want := h.r.GroupVersionKind()
	got := obj.GetObjectKind().GroupVersionKind()
	if got.GroupVersion() != want.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", got.GroupVersion(), want.GroupVersion()))
	}
	if got.Kind != want.Kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: the kind in the data does not match the kind of the endpoint", got.Kind, got.Version, want.Kind))
	}
	return obj, nil
}

// decodeError words a body that does not decode as kube's
// transformDecodeError: by its kind (the endpoint's when it names none)
// once its apiVersion and kind can be read, else as unrecognized.
func (h *Handler) decodeError(err error, body []byte, isYAML bool) error {
	var tm metav1.TypeMeta
	data := body
	if isYAML {
		if j, yerr := yaml.YAMLToJSON(body); yerr == nil {
			data = j
		}
	}
	if json.Unmarshal(data, &tm) == nil {
		gvk := h.r.GroupVersionKind()
		if gv, perr := schema.ParseGroupVersion(tm.APIVersion); perr == nil && tm.APIVersion != "" {
			gvk.Version = gv.Version
		}
		if tm.Kind != "" {
			gvk.Kind = tm.Kind
		}
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, h.r.Kind, err))
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", h.r.Kind, err, summarize(body, 30)))
}

// summarize shows the start of a body that did not decode, as kube does.
func summarize(data []byte, max int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > max {
			return string(data[:max]) + " ..."
		}
		return string(data)
	default:
		if len(data) > max {
			return hex.EncodeToString(data[:max]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// yamlWarnings splits a YAML strict decoding error into one warning per
// offending field, as kube's parseYAMLWarnings; other errors are one
// warning each.
func yamlWarnings(msg string) []string {
	const short, long = "yaml: unmarshal errors:\n", "error converting YAML to JSON: yaml: unmarshal errors:\n"
	var rest string
	switch {
	case strings.HasPrefix(msg, short):
		rest = strings.TrimPrefix(msg, short)
	case strings.HasPrefix(msg, long):
		rest = strings.TrimPrefix(msg, long)
	default:
		return []string{msg}
	}
	parts := strings.Split(rest, "\n")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// isDryRun reports whether validated dryRun options ask for a dry run.
func isDryRun(dryRun []string) bool { return len(dryRun) != 0 }
