package rest

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/auditannotation"
	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/storage"
)

// Handler serves one resource. It is safe for concurrent use.
type Handler struct {
	r     *resource.Resource
	store storage.Interface
	keys  storage.Keys
	clock clock.PassiveClock
	log   *slog.Logger
	// watchTimeout is how long a watch without timeoutSeconds lasts.
	watchTimeout func() time.Duration
	// patcher applies patches and keeps managedFields.
	patcher *patch.Patcher
	// admission are the plugins every write goes through, in order.
	admission []Admission
	// authorizer decides what a request does beyond its verb; nil lets it.
	authorizer Authorizer
	// actions are the handlers of the resource's actions, by name.
	actions map[string]*Handler
	// scale serves /scale; nil when the resource has none.
	scale *scaler
	// offers are the response forms the resource has besides JSON and
	// YAML.
	offers offer
	// watchMetrics records the watches served; nil records nothing.
	watchMetrics *WatchMetrics
	// encodings shares the encoding of stored objects among the watches
	// and lists that send them.
	encodings *encodingCache
}

// Option configures a Handler.
type Option func(*Handler)

// WithClock sets the clock that stamps creation and deletion times.
func WithClock(c clock.PassiveClock) Option { return func(h *Handler) { h.clock = c } }

// WithLogger sets where the handler logs.
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// New returns the handler of r, storing in store under keys.
func New(r *resource.Resource, store storage.Interface, keys storage.Keys, opts ...Option) (*Handler, error) {
	if r.Objects == nil {
		return nil, fmt.Errorf("resource %s declares no Objects", r.GroupVersionResource)
	}
	h := &Handler{r: r, store: store, keys: keys, clock: clock.RealClock{}, log: slog.New(slog.DiscardHandler), watchTimeout: defaultWatchTimeout, offers: offerOf(r), encodings: newEncodingCache()}
	for _, o := range opts {
		o(h)
	}
	if err := checkAdmission(h.admission); err != nil {
		return nil, fmt.Errorf("serve %s: %w", r.GroupResource(), err)
	}
	if err := checkUnstored(r); err != nil {
		return nil, err
	}
	actions, err := actionHandlers(h)
	if err != nil {
		return nil, err
	}
	h.actions = actions
	if h.scale, err = newScaler(h); err != nil {
		return nil, err
	}
	if !r.Stored() {
		return h, nil
	}
	p, err := patch.New(r)
	if err != nil {
		return nil, fmt.Errorf("serve %s: %w", r.GroupResource(), err)
	}
	h.patcher = p
	return h, nil
}

// Serve answers a request for this handler's resource. Its errors are
// written here in the form kube-apiserver's ErrorNegotiated picks: the
// first Accept clause without a conversion that one of the server's
// media types matches (a custom resource's errors, too, may be
// protobuf), else indented JSON.
func (h *Handler) Serve(c echo.Context, info *requestinfo.Info) error {
	err := h.serve(c, info)
	if err == nil || c.Response().Committed {
		return err
	}
	out, nerr := negotiate(c.Request(), false, errorOffer)
	if nerr != nil {
		out = output{pretty: true}
	}
	return apistatus.WriteEncoded(c.Response(), err, func(st *metav1.Status) ([]byte, string, error) {
		return encode(st, out)
	})
}

// acceptable refuses a write whose answer the client could not read
// before anything is written, as kube's handlers negotiate first; reads
// negotiate before they read anyway.
func (h *Handler) acceptable(c echo.Context, verb string) error {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		_, err := negotiate(c.Request(), false, h.offers)
		return err
	}
	return nil
}

func (h *Handler) serve(c echo.Context, info *requestinfo.Info) error {
	if err := h.route(info); err != nil {
		return err
	}
	w := newWarnings(c)
	for _, msg := range h.r.Warnings {
		w.add(msg)
	}
	// Libraries a strategy calls warn through the context, as kube's CEL
	// validation does of a rule failure that ratcheting let through.
	// Admission's audit annotations go back to the gateway, which audits
	// the request.
	ctx := auditannotation.WithRecorder(c.Request().Context(), c.Response().Header())
	c.SetRequest(c.Request().WithContext(warning.WithWarningRecorder(ctx, w)))
	if !h.r.Namespaced && info.Namespace != "" {
		// Only /api/v1/namespaces/<name> gets here with a namespace:
		// request info names the namespace itself as its namespace, as
		// kube's does, and a cluster-scoped object has none.
		scoped := *info
		scoped.Namespace = ""
		info = &scoped
	}
	switch info.Subresource {
	case "":
	case "status":
		if !h.r.Subresources.Status {
			return apistatus.NoRoute()
		}
		switch info.Verb {
		case "get", "update", "patch":
		default:
			return apierrors.NewMethodNotSupported(h.r.GroupResource(), info.Verb)
		}
	case scaleSubresource:
		if h.scale == nil {
			return apistatus.NoRoute()
		}
		switch info.Verb {
		case "get", "update", "patch":
		default:
			return apierrors.NewMethodNotSupported(h.r.GroupResource(), info.Verb)
		}
	case "finalize":
		if !h.r.Subresources.Finalize {
			return apistatus.NoRoute()
		}
		if info.Verb != "update" {
			return apierrors.NewMethodNotSupported(h.r.GroupResource(), info.Verb)
		}
	default:
		a, ok := h.actions[info.Subresource]
		if !ok {
			return apistatus.NoRoute()
		}
		if info.Verb != "create" {
			return apierrors.NewMethodNotSupported(h.r.GroupResource(), info.Verb)
		}
		return a.createUnstored(c, info)
	}
	if !h.allows(info.Verb) {
		return apierrors.NewMethodNotSupported(h.r.GroupResource(), info.Verb)
	}
	if !h.r.Stored() {
		return h.createUnstored(c, info)
	}
	if info.Subresource == scaleSubresource {
		return h.serveScale(c, info)
	}
	if err := h.acceptable(c, info.Verb); err != nil {
		return err
	}
	switch info.Verb {
	case "get":
		return h.get(c, info)
	case "list":
		return h.list(c, info)
	case "watch":
		return h.watch(c, info)
	case "create":
		return h.create(c, info)
	case "update":
		return h.update(c, info)
	case "patch":
		return h.patch(c, info)
	case "delete":
		return h.delete(c, info)
	case "deletecollection":
		return h.deleteCollection(c, info)
	}
	return apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, info.Verb, h.r.GroupResource(), info.Name, "", 0, false)
}

func (h *Handler) allows(verb string) bool {
	for _, v := range h.r.VerbList() {
		if v == verb {
			return true
		}
	}
	return false
}
