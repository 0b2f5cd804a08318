package apistatus

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/storage"
)

// OptimisticLockErrorMsg is kube-apiserver's message for a stale
// resourceVersion; kubectl and controllers match on it.
const OptimisticLockErrorMsg = "the object has been modified; please apply your changes to the latest version and try again"

// FromStorage translates a storage error about the object name of gr into
// the API error kube-apiserver returns for it. Errors that are not storage
// errors are returned unchanged.
func FromStorage(err error, gr schema.GroupResource, name string) error {
	var se *storage.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code {
	case storage.ErrCodeKeyNotFound:
		return apierrors.NewNotFound(gr, name)
	case storage.ErrCodeKeyExists:
		return apierrors.NewAlreadyExists(gr, name)
	case storage.ErrCodeResourceVersionConflicts:
		return apierrors.NewConflict(gr, name, errors.New(OptimisticLockErrorMsg))
	case storage.ErrCodeInvalidObj:
		return apierrors.NewConflict(gr, name, errors.New(se.Detail))
	case storage.ErrCodeExpired:
		msg := se.Detail
		if msg == "" {
			msg = fmt.Sprintf("resource version %d has been compacted", se.ResourceVersion)
		}
		return apierrors.NewResourceExpired(msg)
	case storage.ErrCodeTooLargeResourceVersion:
		return tooLargeResourceVersion(se)
	case storage.ErrCodeInvalidRequest:
		return apierrors.NewBadRequest(se.Detail)
	case storage.ErrCodeUnreachable:
		return apierrors.NewServiceUnavailable("storage is unreachable")
	}
	return apierrors.NewInternalError(err)
}

// tooLargeResourceVersion is the 504 with a ResourceVersionTooLarge cause
// that client-go's reflector recognizes (apierrors.IsTooLargeResourceVersion)
// and answers by relisting.
func tooLargeResourceVersion(se *storage.Error) error {
	msg := "Too large resource version"
	if se.Detail != "" {
		msg = se.Detail
	}
	st := apierrors.NewTimeoutError(msg, 1)
	st.ErrStatus.Details.Causes = append(st.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	})
	return st
}

// Status returns the metav1.Status a client sees for err: its own for API
// errors, 500 InternalError for anything else, as kube-apiserver does.
func Status(err error) *metav1.Status {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		st := apiStatus.Status()
		if st.Code == 0 {
			st.Code = http.StatusInternalServerError
		}
		st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
		st.Status = metav1.StatusFailure
		return &st
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return fromHTTPError(he)
	}
	st := apierrors.NewInternalError(err).ErrStatus
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	return &st
}

// NoRoute is kube-apiserver's answer to a path its router has no route
// for: 404 NotFound, "the server could not find the requested resource",
// with empty details.
func NoRoute() *apierrors.StatusError {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false)
}

// fromHTTPError covers what echo itself rejects before a handler runs:
// unknown routes, wrong methods and oversized bodies.
func fromHTTPError(he *echo.HTTPError) *metav1.Status {
	var err *apierrors.StatusError
	switch he.Code {
	case http.StatusNotFound:
		err = NoRoute()
	case http.StatusMethodNotAllowed:
		err = apierrors.NewMethodNotSupported(schema.GroupResource{}, "")
	case http.StatusRequestEntityTooLarge:
		err = apierrors.NewRequestEntityTooLargeError("limit is 3145728")
	default:
		err = apierrors.NewGenericServerResponse(he.Code, "", schema.GroupResource{}, "", fmt.Sprint(he.Message), 0, false)
	}
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	return &st
}

// WriteHTTP sends err to the client as kube's JSON metav1.Status with its
// code: every service answers errors through it, so a wrapped API error
// keeps its code everywhere.
func WriteHTTP(w http.ResponseWriter, err error) error {
	st := Status(err)
	body, merr := json.Marshal(st)
	if merr != nil {
		return fmt.Errorf("encode status: %w", merr)
	}
	return writeStatus(w, st, "application/json", append(body, '\n'))
}

// WriteEncoded is WriteHTTP in the form a handler negotiated, as
// kube-apiserver negotiates its errors: encode returns the Status's
// bytes and their content type.
func WriteEncoded(w http.ResponseWriter, err error, encode func(*metav1.Status) ([]byte, string, error)) error {
	st := Status(err)
	body, contentType, merr := encode(st)
	if merr != nil {
		return fmt.Errorf("encode status: %w", merr)
	}
	return writeStatus(w, st, contentType, body)
}

func writeStatus(w http.ResponseWriter, st *metav1.Status, contentType string, body []byte) error {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// As kube-apiserver's: client-go sends a request again by itself,
	// whatever its verb, only when the answer carries Retry-After.
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	w.WriteHeader(int(st.Code))
	if _, werr := w.Write(body); werr != nil {
		return fmt.Errorf("write status: %w", werr)
	}
	return nil
}

// Write is WriteHTTP for an echo handler.
func Write(c echo.Context, err error) error {
	return WriteHTTP(c.Response(), err)
}

// HTTPErrorHandler is an echo.HTTPErrorHandler that answers every error
// echo sees with a Status, so no client ever gets echo's own error body.
func HTTPErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if werr := Write(c, err); werr != nil {
		c.Logger().Error(werr)
	}
}
