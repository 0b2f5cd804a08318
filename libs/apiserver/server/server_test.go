package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/warning"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/storage"
)

func TestRouting(t *testing.T) {
	panicky := server.RoutesFunc(func(e *echo.Echo) {
		e.GET("/panic", func(echo.Context) error { panic("boom") })
	})
	f := newFixture(t, direct, panicky)

	for _, tc := range []struct {
		name, path string
		code       int
		reason     metav1.StatusReason
		message    string
	}{
		{"unknown resource", "/api/v1/foos", 404, metav1.StatusReasonNotFound, "the server could not find the requested resource"},
		{"unknown group", "/apis/nope.io/v1/namespaces/x/widgets", 404, metav1.StatusReasonNotFound, "the server could not find the requested resource"},
		{"non-resource path", "/nothing/here", 404, metav1.StatusReasonNotFound, "the server could not find the requested resource"},
		{"unknown subresource", "/apis/example.com/v1/namespaces/x/widgets/w/scale", 404, metav1.StatusReasonNotFound, ""},
		{"panic", "/panic", 500, metav1.StatusReasonInternalError, "This request caused apiserver to panic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := getStatus(t, f.url+tc.path, "")
			if int(st.Code) != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.message) {
				t.Errorf("GET %s = %d %s %q, want %d %s %q", tc.path, st.Code, st.Reason, st.Message, tc.code, tc.reason, tc.message)
			}
		})
	}

	t.Run("replace resources", func(t *testing.T) {
		f.seedWidget("ns1", "w", 1)
		if !servesWidgets(t, f) {
			t.Fatal("discovery and OpenAPI do not list widgets")
		}
		all := f.res
		if err := f.srv.Replace(all[:1]); err != nil {
			t.Fatal(err)
		}
		if st := getStatus(t, f.url+"/apis/example.com/v1/namespaces/ns1/widgets/w", ""); st.Code != 404 {
			t.Errorf("dropped resource answered %d, want 404", st.Code)
		}
		if servesWidgets(t, f) {
			t.Error("discovery or OpenAPI still list dropped widgets")
		}
		if err := f.srv.Replace(all); err != nil {
			t.Fatal(err)
		}
		if resp, body := get(t, f.url+"/apis/example.com/v1/namespaces/ns1/widgets/w", ""); resp.StatusCode != 200 {
			t.Errorf("restored resource answered %d %s", resp.StatusCode, body)
		}
		if err := f.srv.Replace(append(all, all[0])); err == nil {
			t.Error("Replace accepted a resource declared twice")
		}
	})

	t.Run("a resource's warnings are sent with every response", func(t *testing.T) {
		warned := *f.res[len(f.res)-1]
		warned.Warnings = []string{"example.com/v1 Widget is deprecated"}
		if err := f.srv.Replace(append(f.res[:len(f.res)-1:len(f.res)-1], &warned)); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/apis/example.com/v1/namespaces/ns1/widgets/w", "/apis/example.com/v1/namespaces/ns1/widgets", "/apis/example.com/v1/namespaces/ns1/widgets/missing"} {
			resp, _ := get(t, f.url+path, "")
			if got := resp.Header.Values("Warning"); len(got) != 1 || got[0] != `299 - "example.com/v1 Widget is deprecated"` {
				t.Errorf("GET %s: Warning %q", path, got)
			}
		}
		if err := f.srv.Replace(f.res); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("warnings a strategy reports through the context", func(t *testing.T) {
		warned := *f.res[len(f.res)-1]
		warned.Strategy = warningStrategy{}
		if err := f.srv.Replace(append(f.res[:len(f.res)-1:len(f.res)-1], &warned)); err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, f.url+"/apis/example.com/v1/namespaces/ns1/widgets", strings.NewReader(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"warned"}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Values("Warning"); resp.StatusCode != http.StatusCreated || len(got) != 1 || got[0] != `299 - "spec.size: ratcheted"` {
			t.Errorf("create: %d, Warning %q", resp.StatusCode, got)
		}
		if err := f.srv.Replace(f.res); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a new store version gets a new store", func(t *testing.T) {
		widgets := f.res[len(f.res)-1]
		gvr := widgets.GroupVersionResource
		before, _ := f.store(gvr)
		same := *widgets
		if err := f.srv.Replace(append(f.res[:len(f.res)-1:len(f.res)-1], &same)); err != nil {
			t.Fatal(err)
		}
		if kept, _ := f.store(gvr); kept != before {
			t.Error("a redeclared resource got a new store although its StoreGeneration did not change")
		}
		changed := *widgets
		changed.StoreGeneration = "2"
		if err := f.srv.Replace(append(f.res[:len(f.res)-1:len(f.res)-1], &changed)); err != nil {
			t.Fatal(err)
		}
		if rebuilt, _ := f.store(gvr); rebuilt == before {
			t.Error("a resource whose StoreGeneration changed kept its store: its objects would be read by the old declaration")
		}
		if resp, body := get(t, f.url+"/apis/example.com/v1/namespaces/ns1/widgets/w", ""); resp.StatusCode != 200 {
			t.Errorf("widget through the new store answered %d %s", resp.StatusCode, body)
		}
	})
}

// servesWidgets reports whether both discovery and OpenAPI v3 list
// widgets.example.com; it fails the test when they disagree.
func servesWidgets(t *testing.T, f *fixture) bool {
	t.Helper()
	_, groups := get(t, f.url+"/apis", "application/json")
	_, paths := get(t, f.url+"/openapi/v3", "application/json")
	_, core := get(t, f.url+"/api/v1", "application/json")
	if !strings.Contains(string(core), `"name":"configmaps"`) {
		t.Errorf("/api/v1 = %s, want configmaps listed", core)
	}
	inDiscovery := strings.Contains(string(groups), `"example.com"`)
	inOpenAPI := strings.Contains(string(paths), `apis/example.com/v1`)
	if inDiscovery != inOpenAPI {
		t.Errorf("discovery lists widgets: %v, OpenAPI: %v (%s / %s)", inDiscovery, inOpenAPI, groups, paths)
	}
	return inDiscovery
}

func TestBodyLimit(t *testing.T) {
	f := newFixture(t, direct)
	big := bytes.Repeat([]byte("x"), server.DefaultMaxRequestBodyBytes+1)
	for _, tc := range []struct {
		name    string
		chunked bool
	}{{"content length", false}, {"chunked", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(big)
			if tc.chunked {
				// A reader of unknown length makes the client send chunks.
				body = io.MultiReader(body)
			}
			req, err := http.NewRequestWithContext(f.ctx, http.MethodPost, f.url+"/api/v1/namespaces/ns1/configmaps", body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var st metav1.Status
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 413 || st.Reason != metav1.StatusReasonRequestEntityTooLarge || st.Message != "Request entity too large: limit is 3145728" {
				t.Errorf("got %d %s %q, want 413 RequestEntityTooLarge", resp.StatusCode, st.Reason, st.Message)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	res := resources(t)
	for _, tc := range []struct {
		name string
		opts server.Options
		errs int
	}{
		{"no stores", server.Options{Resources: res}, 1},
		{"negative limit", server.Options{Resources: res, Stores: nil, MaxRequestBodyBytes: -1}, 2},
		{"duplicate", server.Options{Resources: append(res, res[1]), Stores: server.EtcdStores(nil, "", nil)}, 1},
		{"valid", server.Options{Resources: res, Stores: server.EtcdStores(nil, "", nil)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if errs := tc.opts.Validate(); len(errs) != tc.errs {
				t.Errorf("Validate() = %v, want %d errors", errs, tc.errs)
			}
		})
	}
}

// warningStrategy warns through the request's context, as kube's CEL
// validation does of a failure ratcheting lets through.
type warningStrategy struct{}

func (warningStrategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (warningStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (warningStrategy) Validate(ctx context.Context, _ runtime.Object) field.ErrorList {
	warning.AddWarning(ctx, "", "spec.size: ratcheted")
	return nil
}
func (warningStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}

// TestMissing answers requests for resources the server does not serve
// with what Options.Missing says, Retry-After included, and with 404
// when it says nothing.
func TestMissing(t *testing.T) {
	opts := server.Options{
		Stores: func(*resource.Resource) (storage.Interface, storage.Keys, error) {
			return nil, storage.Keys{}, errors.New("no resource is served")
		},
		Missing: func(_ context.Context, gvr schema.GroupVersionResource) (bool, error) {
			if gvr.Group != "later.example.com" {
				return false, nil
			}
			err := apierrors.NewServiceUnavailable("not yet")
			err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 2}
			return false, err
		},
	}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	for _, tc := range []struct {
		path       string
		code       int
		retryAfter string
	}{
		{path: "/apis/later.example.com/v1/namespaces/ns/things", code: 503, retryAfter: "2"},
		{path: "/apis/nope.example.com/v1/namespaces/ns/things", code: 404},
	} {
		resp, body := get(t, hs.URL+tc.path, "")
		if resp.StatusCode != tc.code || resp.Header.Get("Retry-After") != tc.retryAfter {
			t.Errorf("GET %s = %d with Retry-After %q, want %d with %q: %s", tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), tc.code, tc.retryAfter, body)
		}
	}
}
