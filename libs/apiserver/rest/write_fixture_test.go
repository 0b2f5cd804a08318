package rest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/etcd3"
)

// writeFixture serves ConfigMaps (typed) and Widgets (unstructured, with
// status and scale subresources and a strategy that validates spec.size)
// from a real embedded etcd over real HTTP.
type writeFixture struct {
	url string
	// handler serves the fixture's requests, for clients that call it
	// in process.
	handler http.Handler
	stores  map[string]storage.Interface
	keys    map[string]storage.Keys
}

func configMapResource(tb testing.TB) *resource.Resource {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	o, err := objects.NewTyped(scheme, gvk, "ConfigMapList")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := builtin.Schema(gvk)
	if err != nil {
		tb.Fatal(err)
	}
	return &resource.Resource{
		GroupVersionResource: corev1.SchemeGroupVersion.WithResource("configmaps"),
		// Generation on, so the generation rules are tested on a typed kind too.
		Generation: true,
		Kind:       "ConfigMap",
		Namespaced: true,
		Schema:     s,
		Objects:    o,
	}
}

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

func widgetResource() *resource.Resource {
	return &resource.Resource{
		GroupVersionResource: widgetGVK.GroupVersion().WithResource("widgets"),
		Kind:                 "Widget",
		Namespaced:           true,
		Subresources: resource.Subresources{Status: true, Scale: &resource.Scale{
			SpecReplicasPath:   ".spec.replicas",
			StatusReplicasPath: ".status.replicas",
			LabelSelectorPath:  ".status.selector",
		}},
		Generation: true,
		Objects:    objects.NewUnstructured(widgetGVK, "WidgetList"),
		Strategy:   widgetStrategy{},
	}
}

// widgetStrategy refuses a negative spec.size, the kind's own rule.
type widgetStrategy struct{}

func (widgetStrategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (widgetStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (widgetStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateWidget(obj)
}
func (widgetStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateWidget(obj)
}

func validateWidget(obj runtime.Object) field.ErrorList {
	size, found, err := unstructured.NestedInt64(obj.(*unstructured.Unstructured).Object, "spec", "size")
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "size"), "", err.Error())}
	}
	if found && size < 0 {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "size"), size, "must be greater than or equal to 0")}
	}
	return nil
}

// newWriteFixture serves configmaps, widgets and namespaces, each
// handler built with opts.
func newWriteFixture(tb testing.TB, opts ...rest.Option) *writeFixture {
	tb.Helper()
	return newWrappedFixture(tb, func(s storage.Interface) storage.Interface { return s }, opts...)
}

// newWrappedFixture is newWriteFixture with each resource's store wrapped
// by wrap, as a watch cache wraps it.
func newWrappedFixture(tb testing.TB, wrap func(storage.Interface) storage.Interface, opts ...rest.Option) *writeFixture {
	tb.Helper()
	client := etcdtest.Start(tb).Client(tb)
	f := &writeFixture{stores: map[string]storage.Interface{}, keys: map[string]storage.Keys{}}
	handlers := map[string]*rest.Handler{}
	for _, r := range []*resource.Resource{configMapResource(tb), widgetResource(), namespaceResource(tb)} {
		gvr := r.GroupVersionResource
		store := wrap(etcd3.New(client, r.Objects, r.Objects.New))
		keys := storage.NewKeys("/kplane", gvr.Group, gvr.Resource)
		h, err := rest.New(r, store, keys, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		handlers[gvr.Resource] = h
		f.stores[gvr.Resource] = store
		f.keys[gvr.Resource] = keys
	}
	e := echo.New()
	e.HTTPErrorHandler = apistatus.HTTPErrorHandler
	e.Any("/*", func(c echo.Context) error {
		info := requestinfo.Parse(c.Request().Method, c.Request().URL)
		h, ok := handlers[info.Resource]
		if !ok {
			return echo.ErrNotFound
		}
		return h.Serve(c, info)
	})
	f.handler = e
	srv := httptest.NewServer(e)
	tb.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

type response struct {
	code    int
	header  http.Header
	body    []byte
	status  metav1.Status
	content map[string]any
}

// meta returns the response object's metadata.
func (r response) meta(tb testing.TB) *unstructured.Unstructured {
	tb.Helper()
	return &unstructured.Unstructured{Object: r.content}
}

const (
	jsonType  = "application/json"
	mergeType = "application/merge-patch+json"
	applyType = "application/apply-patch+yaml"
)

// do sends one request; contentType "" sends JSON.
func (f *writeFixture) do(tb testing.TB, method, path, contentType, body string) response {
	tb.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if contentType == "" {
		contentType = jsonType
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "kubectl/v1.35.0 (linux/amd64) kubernetes/abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	r := response{code: resp.StatusCode, header: resp.Header, body: data}
	// utiljson keeps integers int64, as unstructured accessors expect.
	if err := utiljson.Unmarshal(data, &r.content); err != nil {
		tb.Fatalf("%s %s: response %q is not JSON: %v", method, path, data, err)
	}
	if r.content["kind"] == "Status" {
		if err := json.Unmarshal(data, &r.status); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// stored reads an object straight from storage, or nil when absent.
func (f *writeFixture) stored(tb testing.TB, resource, namespace, name string) *unstructured.Unstructured {
	tb.Helper()
	obj, err := f.stores[resource].Get(context.Background(), f.keys[resource].Object(namespace, name), storage.GetOptions{})
	if storage.IsNotFound(err) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// wantStatus fails unless r is the Status kube answers with.
func wantStatus(tb testing.TB, r response, code int, reason metav1.StatusReason, message string) {
	tb.Helper()
	if r.code != code || r.status.Reason != reason || r.status.Message != message {
		tb.Fatalf("got %d %s %q\nwant %d %s %q", r.code, r.status.Reason, r.status.Message, code, reason, message)
	}
}

// setStatus writes status.phase straight to storage, as a controller
// through /status would.
func setStatus(phase string) storage.UpdateFunc {
	return func(existing runtime.Object) (runtime.Object, error) {
		u := existing.(*unstructured.Unstructured)
		if err := unstructured.SetNestedField(u.Object, phase, "status", "phase"); err != nil {
			return nil, err
		}
		return u, nil
	}
}
