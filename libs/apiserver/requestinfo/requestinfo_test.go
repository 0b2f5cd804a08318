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
