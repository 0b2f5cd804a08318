package apistatus_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/storage"
)

func TestFromStorage(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	cases := []struct {
		err     error
		code    int32
		reason  metav1.StatusReason
		message string
	}{
		{storage.NewError(storage.ErrCodeKeyNotFound, "/k", 0, ""), 404, metav1.StatusReasonNotFound, `configmaps "a" not found`},
		{storage.NewError(storage.ErrCodeKeyExists, "/k", 0, ""), 409, metav1.StatusReasonAlreadyExists, `configmaps "a" already exists`},
		{storage.NewError(storage.ErrCodeResourceVersionConflicts, "/k", 0, ""), 409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again`},
		{storage.NewError(storage.ErrCodeInvalidObj, "/k", 0, "Precondition failed: UID in precondition: x, UID in object meta: y"), 409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on configmaps "a": Precondition failed: UID in precondition: x, UID in object meta: y`},
		{storage.NewError(storage.ErrCodeExpired, "/k", 5, "too old resource version: 5 (10)"), 410, metav1.StatusReasonExpired, "too old resource version: 5 (10)"},
		{storage.NewError(storage.ErrCodeTooLargeResourceVersion, "/k", 3, "Too large resource version: 9, current: 3"), 504, metav1.StatusReasonTimeout, "Timeout: Too large resource version: 9, current: 3"},
		{storage.NewError(storage.ErrCodeInvalidRequest, "/k", 0, "invalid continue token"), 400, metav1.StatusReasonBadRequest, "invalid continue token"},
		{storage.NewError(storage.ErrCodeUnreachable, "/k", 0, ""), 503, metav1.StatusReasonServiceUnavailable, "storage is unreachable"},
		{errors.New("boom"), 500, metav1.StatusReasonInternalError, "Internal error occurred: boom"},
	}
	for _, tc := range cases {
		t.Run(string(tc.reason), func(t *testing.T) {
			st := apistatus.Status(apistatus.FromStorage(tc.err, gr, "a"))
			if st.Code != tc.code || st.Reason != tc.reason || st.Message != tc.message {
				t.Fatalf("got %d %s %q, want %d %s %q", st.Code, st.Reason, st.Message, tc.code, tc.reason, tc.message)
			}
		})
	}
}

func TestTooLargeResourceVersionIsRecognizedByClients(t *testing.T) {
	err := apistatus.FromStorage(storage.NewError(storage.ErrCodeTooLargeResourceVersion, "/k", 3, ""), schema.GroupResource{}, "")
	if !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		t.Fatalf("client-go does not see %v as a too-large resourceVersion", err)
	}
}

func TestEchoErrorsBecomeStatuses(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = apistatus.HTTPErrorHandler
	e.GET("/only-get", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	cases := []struct {
		method, path string
		code         int
		reason       metav1.StatusReason
	}{
		{http.MethodGet, "/nowhere", 404, metav1.StatusReasonNotFound},
		{http.MethodPost, "/only-get", 405, metav1.StatusReasonMethodNotAllowed},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		var st metav1.Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("%s %s: body %q is not a Status: %v", tc.method, tc.path, rec.Body, err)
		}
		if rec.Code != tc.code || st.Reason != tc.reason || st.Kind != "Status" {
			t.Errorf("%s %s: got %d %+v, want %d %s", tc.method, tc.path, rec.Code, st, tc.code, tc.reason)
		}
	}
}

// TestWriteHTTPKeepsWrappedCodes writes errors as every service does: an
// API error wrapped on its way up keeps its code and reason.
func TestWriteHTTPKeepsWrappedCodes(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		code    int
		reason  metav1.StatusReason
		message string
	}{
		{"plain", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("no")), 403, metav1.StatusReasonForbidden, `configmaps "a" is forbidden: no`},
		{"wrapped", fmt.Errorf("decide review: %w", apierrors.NewServiceUnavailable("authz is down")), 503, metav1.StatusReasonServiceUnavailable, "authz is down"},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", apierrors.NewBadRequest("bad"))), 400, metav1.StatusReasonBadRequest, "bad"},
		{"not an API error", errors.New("boom"), 500, metav1.StatusReasonInternalError, "Internal error occurred: boom"},
		{"no route", apistatus.NoRoute(), 404, metav1.StatusReasonNotFound, "the server could not find the requested resource"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := apistatus.WriteHTTP(rec, tc.err); err != nil {
				t.Fatal(err)
			}
			var st metav1.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatalf("body %q is not a Status: %v", rec.Body, err)
			}
			if rec.Code != tc.code || int(st.Code) != tc.code || st.Reason != tc.reason || st.Message != tc.message || st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure {
				t.Errorf("got %d %+v, want %d %s %q", rec.Code, st, tc.code, tc.reason, tc.message)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// TestNoRouteIsKubesBody is byte for byte what kube-apiserver's router
// answers for a path it has no route for.
func TestNoRouteIsKubesBody(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := apistatus.WriteHTTP(rec, apistatus.NoRoute()); err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}` + "\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
}

// TestWriteHTTPSetsRetryAfter sets the header client-go needs to send a
// request again by itself, from the Status's details, as kube-apiserver
// does.
func TestWriteHTTPSetsRetryAfter(t *testing.T) {
	err := apierrors.NewServiceUnavailable("not yet")
	err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 3}
	rec := httptest.NewRecorder()
	if werr := apistatus.WriteHTTP(rec, err); werr != nil {
		t.Fatal(werr)
	}
	if got := rec.Header().Get("Retry-After"); got != "3" {
		t.Errorf("Retry-After %q, want 3", got)
	}
	rec = httptest.NewRecorder()
	if werr := apistatus.WriteHTTP(rec, apierrors.NewServiceUnavailable("down")); werr != nil {
		t.Fatal(werr)
	}
	if got := rec.Header().Get("Retry-After"); got != "" {
		t.Errorf("Retry-After %q without RetryAfterSeconds, want none", got)
	}
}
