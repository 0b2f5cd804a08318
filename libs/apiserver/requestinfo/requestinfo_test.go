package requestinfo_test

import (
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"kplane.dev/libs/apiserver/requestinfo"
)

func TestParse(t *testing.T) {
	type want struct {
		resourceReq                                      bool
		verb, prefix, group, version, ns, res, sub, name string
	}
	cases := []struct {
		method, url string
		want        want
	}{
		{"GET", "/api/v1/namespaces", want{true, "list", "api", "", "v1", "", "namespaces", "", ""}},
		{"GET", "/api/v1/namespaces/other", want{true, "get", "api", "", "v1", "other", "namespaces", "", "other"}},
		{"GET", "/api/v1/namespaces/other/pods", want{true, "list", "api", "", "v1", "other", "pods", "", ""}},
		{"GET", "/api/v1/namespaces/other/pods/foo", want{true, "get", "api", "", "v1", "other", "pods", "", "foo"}},
		{"HEAD", "/api/v1/namespaces/other/pods/foo", want{true, "get", "api", "", "v1", "other", "pods", "", "foo"}},
		{"GET", "/api/v1/pods", want{true, "list", "api", "", "v1", "", "pods", "", ""}},
		{"GET", "/api/v1/namespaces/other/pods?watch=true", want{true, "watch", "api", "", "v1", "other", "pods", "", ""}},
		{"GET", "/api/v1/namespaces/other/pods?watch=1", want{true, "watch", "api", "", "v1", "other", "pods", "", ""}},
		{"GET", "/api/v1/namespaces/other/pods?watch=false", want{true, "list", "api", "", "v1", "other", "pods", "", ""}},
		{"GET", "/api/v1/watch/namespaces/other/pods", want{true, "watch", "api", "", "v1", "other", "pods", "", ""}},
		{"GET", "/api/v1/watch/namespaces/other/pods/foo", want{true, "watch", "api", "", "v1", "other", "pods", "", "foo"}},
		{"GET", "/api/v1/watch/pods", want{true, "watch", "api", "", "v1", "", "pods", "", ""}},
		{"GET", "/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3Dfoo", want{true, "list", "api", "", "v1", "other", "pods", "", "foo"}},
		{"GET", "/api/v1/namespaces/other/pods?watch=true&fieldSelector=metadata.name%3Dfoo", want{true, "watch", "api", "", "v1", "other", "pods", "", "foo"}},
		{"GET", "/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3D..", want{true, "list", "api", "", "v1", "other", "pods", "", ""}},
		{"GET", "/api/v1/namespaces/other/pods?fieldSelector=metadata.name!%3Dfoo", want{true, "list", "api", "", "v1", "other", "pods", "", ""}},
		{"DELETE", "/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3Dfoo", want{true, "deletecollection", "api", "", "v1", "other", "pods", "", ""}},
		{"POST", "/api/v1/namespaces/other/pods", want{true, "create", "api", "", "v1", "other", "pods", "", ""}},
		{"PUT", "/api/v1/namespaces/other/pods/foo", want{true, "update", "api", "", "v1", "other", "pods", "", "foo"}},
		{"PATCH", "/api/v1/namespaces/other/pods/foo", want{true, "patch", "api", "", "v1", "other", "pods", "", "foo"}},
		{"DELETE", "/api/v1/namespaces/other/pods/foo", want{true, "delete", "api", "", "v1", "other", "pods", "", "foo"}},
		{"DELETE", "/api/v1/namespaces/other/pods", want{true, "deletecollection", "api", "", "v1", "other", "pods", "", ""}},
		{"PUT", "/api/v1/namespaces/other/pods/foo/status", want{true, "update", "api", "", "v1", "other", "pods", "status", "foo"}},
		{"POST", "/api/v1/namespaces/other/serviceaccounts/default/token", want{true, "create", "api", "", "v1", "other", "serviceaccounts", "token", "default"}},
		{"PUT", "/api/v1/namespaces/other/finalize", want{true, "update", "api", "", "v1", "other", "namespaces", "finalize", "other"}},
		{"PUT", "/api/v1/namespaces/other/status", want{true, "update", "api", "", "v1", "other", "namespaces", "status", "other"}},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", want{true, "list", "apis", "rbac.authorization.k8s.io", "v1", "", "clusterroles", "", ""}},
		{"GET", "/apis/example.com/v1/namespaces/ns/widgets/w/scale", want{true, "get", "apis", "example.com", "v1", "ns", "widgets", "scale", "w"}},
		{"GET", "/apis/example.com/v1/watch/namespaces/ns/widgets", want{true, "watch", "apis", "example.com", "v1", "ns", "widgets", "", ""}},
		{"GET", "/api/v1/", want{false, "get", "", "", "", "", "", "", ""}},
		{"GET", "/apis/example.com/v1", want{false, "get", "apis", "", "", "", "", "", ""}},
		{"GET", "/apis/example.com", want{false, "get", "", "", "", "", "", "", ""}},
		{"GET", "/apis", want{false, "get", "", "", "", "", "", "", ""}},
		{"GET", "/healthz", want{false, "get", "", "", "", "", "", "", ""}},
		{"POST", "/openapi/v3", want{false, "post", "", "", "", "", "", "", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.url, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			i := requestinfo.Parse(tc.method, u)
			got := want{i.IsResourceRequest, i.Verb, i.APIPrefix, i.APIGroup, i.APIVersion, i.Namespace, i.Resource, i.Subresource, i.Name}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestNonResourceKeepsMethodAsVerb(t *testing.T) {
	i := requestinfo.Parse(http.MethodDelete, &url.URL{Path: "/logs/x"})
	if i.IsResourceRequest || i.Verb != "delete" || i.Path != "/logs/x" {
		t.Fatalf("got %+v", i)
	}
}

// TestWatchParameter reads ?watch as kube's RequestInfoFactory does: the
// query codec's booleans, and on a query it refuses, kube's fallback.
func TestWatchParameter(t *testing.T) {
	cases := []struct {
		query string
		watch bool
	}{
		{"watch=yes", true},
		{"watch=1", true},
		{"watch=true", true},
		{"watch=TRUE", true},
		{"watch=t", true},
		{"watch", true},
		{"watch=", true},
		{"watch=false", false},
		{"watch=FALSE", false},
		{"watch=0", false},
		// The codec reads only "0" and "false" as false
		// (runtime.Convert_Slice_string_To_bool): "f" is a watch.
		{"watch=f", true},
		{"watch=F", true},
		{"", false},
		{"watch=false&watch=true", false},
		// A query the codec refuses: kube then reads watch alone, and
		// only "false" and "0" are false.
		{"watch=yes&labelSelector=a%20in", true},
		{"watch=f&labelSelector=a%20in", true},
		{"watch=false&labelSelector=a%20in", false},
		{"watch=0&limit=x", false},
		{"labelSelector=a%20in", false},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			u := &url.URL{Path: "/api/v1/namespaces/ns/configmaps", RawQuery: tc.query}
			info := requestinfo.Parse(http.MethodGet, u)
			want := "list"
			if tc.watch {
				want = "watch"
			}
			if info.Verb != want {
				t.Errorf("verb %q, want %q", info.Verb, want)
			}
			if got := requestinfo.ListOptions(u.Query()).Watch; got != tc.watch {
				t.Errorf("ListOptions watch = %v, want %v", got, tc.watch)
			}
		})
	}
}

// TestPathShape records how the path placed the resource, which request
// info's other fields cannot tell: /api/v1/namespaces/x/namespaces/y and
// /api/v1/namespaces/y differ only here.
func TestPathShape(t *testing.T) {
	cases := []struct {
		path                   string
		inNamespace, watchPath bool
		parts                  []string
	}{
		{"/api/v1/namespaces", false, false, []string{"namespaces"}},
		{"/api/v1/namespaces/x", false, false, []string{"namespaces", "x"}},
		{"/api/v1/namespaces/x/status", false, false, []string{"namespaces", "x", "status"}},
		{"/api/v1/namespaces/x/namespaces", true, false, []string{"namespaces"}},
		{"/api/v1/namespaces/x/namespaces/y", true, false, []string{"namespaces", "y"}},
		{"/api/v1/namespaces/x/configmaps/y", true, false, []string{"configmaps", "y"}},
		{"/api/v1/configmaps/y", false, false, []string{"configmaps", "y"}},
		{"/api/v1/watch/namespaces/x/configmaps", true, true, []string{"configmaps"}},
		{"/api/v1/watch/namespaces/x", false, true, []string{"namespaces", "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			i := requestinfo.Parse(http.MethodGet, &url.URL{Path: tc.path})
			if i.InNamespace != tc.inNamespace || i.WatchPath != tc.watchPath || !reflect.DeepEqual(i.Parts, tc.parts) {
				t.Errorf("InNamespace %v WatchPath %v Parts %q, want %v %v %q", i.InNamespace, i.WatchPath, i.Parts, tc.inNamespace, tc.watchPath, tc.parts)
			}
		})
	}
}

func TestOperation(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{http.MethodPost, "/api/v1/namespaces/ns/configmaps", "create configmaps"},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p/log", "get pods/log"},
		{http.MethodGet, "/apis/apps/v1/deployments?watch=true", "watch deployments"},
		{http.MethodGet, "/healthz", "get /healthz"},
	} {
		u, err := url.Parse(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestinfo.Parse(tc.method, u).Operation(); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}
