package rest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/storage"
)

// echoCreater answers with the object it got, its status naming the
// request's namespace and name, so a test sees what reached it.
type echoCreater struct{}

func (echoCreater) Create(_ context.Context, req *resource.CreateRequest) (runtime.Object, error) {
	u := req.Object.(*unstructured.Unstructured).DeepCopy()
	if err := unstructured.SetNestedStringMap(u.Object, map[string]string{"namespace": req.Namespace, "name": req.Name}, "status"); err != nil {
		return nil, err
	}
	return u, nil
}

var (
	reviewGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Review"}
	ticketGVK = schema.GroupVersionKind{Group: "tickets.example.com", Version: "v1", Kind: "Ticket"}
)

// newUnstoredServer serves reviews (not stored) and widgets with a
// "ticket" action; neither has a store.
func newUnstoredServer(t *testing.T) string {
	t.Helper()
	reviews := &resource.Resource{
		GroupVersionResource: reviewGVK.GroupVersion().WithResource("reviews"),
		Kind:                 "Review",
		Verbs:                []string{"create"},
		Objects:              objects.NewUnstructured(reviewGVK, "ReviewList"),
		Creater:              echoCreater{},
	}
	w := widgetResource()
	w.Subresources.Actions = []resource.Action{{Name: "ticket", Kind: ticketGVK, Objects: objects.NewUnstructured(ticketGVK, "TicketList"), Creater: echoCreater{}}}
	handlers := map[string]*rest.Handler{}
	for _, r := range []*resource.Resource{reviews, w} {
		h, err := rest.New(r, nil, r2keys(r))
		if err != nil {
			t.Fatal(err)
		}
		handlers[r.GroupVersionResource.Resource] = h
	}
	e := echo.New()
	e.HTTPErrorHandler = apistatus.HTTPErrorHandler
	e.Any("/*", func(c echo.Context) error {
		info := requestinfo.Parse(c.Request().Method, c.Request().URL)
		return handlers[info.Resource].Serve(c, info)
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestUnstored(t *testing.T) {
	f := &writeFixture{url: newUnstoredServer(t)}
	const (
		reviews = "/apis/example.com/v1/reviews"
		ticket  = "/apis/example.com/v1/namespaces/ns/widgets/w1/ticket"
	)
	cases := []struct {
		name, method, path, body string
		code                     int
		reason                   metav1.StatusReason
		status                   map[string]any
	}{
		{name: "review create", method: http.MethodPost, path: reviews, body: `{"apiVersion":"example.com/v1","kind":"Review","spec":{"a":1}}`,
			code: http.StatusCreated, status: map[string]any{"namespace": "", "name": ""}},
		{name: "review get", method: http.MethodGet, path: reviews + "/x", code: http.StatusMethodNotAllowed, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "review list", method: http.MethodGet, path: reviews, code: http.StatusMethodNotAllowed, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "review wrong kind", method: http.MethodPost, path: reviews, body: `{"apiVersion":"example.com/v1","kind":"Other"}`,
			code: http.StatusBadRequest, reason: metav1.StatusReasonBadRequest},
		{name: "action create", method: http.MethodPost, path: ticket, body: `{"apiVersion":"tickets.example.com/v1","kind":"Ticket"}`,
			code: http.StatusCreated, status: map[string]any{"namespace": "ns", "name": "w1"}},
		{name: "action of the resource's kind", method: http.MethodPost, path: ticket, body: `{"apiVersion":"example.com/v1","kind":"Widget"}`,
			code: http.StatusBadRequest, reason: metav1.StatusReasonBadRequest},
		{name: "action get", method: http.MethodGet, path: ticket, code: http.StatusMethodNotAllowed, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "unknown subresource", method: http.MethodPost, path: "/apis/example.com/v1/namespaces/ns/widgets/w1/other", body: `{}`,
			code: http.StatusNotFound, reason: metav1.StatusReasonNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, tc.method, tc.path, "", tc.body)
			if r.code != tc.code || r.status.Reason != tc.reason {
				t.Fatalf("got %d %s %s, want %d %s", r.code, r.status.Reason, r.body, tc.code, tc.reason)
			}
			if tc.status == nil {
				return
			}
			got, _, _ := unstructured.NestedMap(r.content, "status")
			if len(got) != len(tc.status) || got["namespace"] != tc.status["namespace"] || got["name"] != tc.status["name"] {
				t.Fatalf("status %v, want %v", got, tc.status)
			}
		})
	}
}

func TestUnstoredDeclarations(t *testing.T) {
	cases := []struct {
		name string
		r    *resource.Resource
	}{
		{name: "unstored with list", r: &resource.Resource{GroupVersionResource: reviewGVK.GroupVersion().WithResource("reviews"), Kind: "Review",
			Verbs: []string{"create", "list"}, Objects: objects.NewUnstructured(reviewGVK, "ReviewList"), Creater: echoCreater{}}},
		{name: "action without creater", r: func() *resource.Resource {
			w := widgetResource()
			w.Subresources.Actions = []resource.Action{{Name: "ticket", Kind: ticketGVK, Objects: objects.NewUnstructured(ticketGVK, "TicketList")}}
			return w
		}()},
		{name: "action named status", r: func() *resource.Resource {
			w := widgetResource()
			w.Subresources.Actions = []resource.Action{{Name: "status", Kind: ticketGVK, Objects: objects.NewUnstructured(ticketGVK, "TicketList"), Creater: echoCreater{}}}
			return w
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := rest.New(tc.r, nil, r2keys(tc.r)); err == nil {
				t.Fatal("New accepted an unservable declaration")
			}
		})
	}
}

func r2keys(r *resource.Resource) storage.Keys {
	return storage.NewKeys("/kplane", r.GroupVersionResource.Group, r.GroupVersionResource.Resource)
}

// TestUnstoredHasNoTable: a review has no table, so asking for one is
// kube's 406, as the conformance suite checks of SelfSubjectAccessReview;
// its metadata can still be asked for.
func TestUnstoredHasNoTable(t *testing.T) {
	url := newUnstoredServer(t) + "/apis/example.com/v1/reviews"
	for _, tc := range []struct {
		accept string
		code   int
	}{
		{"application/json;as=Table;v=v1;g=meta.k8s.io", http.StatusNotAcceptable},
		{"application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", http.StatusCreated},
	} {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"apiVersion":"example.com/v1","kind":"Review"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", tc.accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("create with Accept %q: %d, want %d", tc.accept, resp.StatusCode, tc.code)
		}
	}
}
