package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"kplane.dev/libs/apiserver/kubeproto"
)

func TestGet(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, kind)
			seeded := f.seedConfigMap("ns1", "a", nil, map[string]string{"k": "v"})
			f.seedWidget("ns1", "w", 3)
			cs := f.typed()

			got, err := cs.CoreV1().ConfigMaps("ns1").Get(f.ctx, "a", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if got.Data["k"] != "v" || got.ResourceVersion != seeded.ResourceVersion || got.UID != seeded.UID {
				t.Errorf("get = %+v, want the seeded configmap %+v", got, seeded)
			}
			if _, err := cs.CoreV1().ConfigMaps("ns1").Get(f.ctx, "a", metav1.GetOptions{ResourceVersion: "0"}); err != nil {
				t.Errorf("get rv=0: %v", err)
			}

			_, err = cs.CoreV1().ConfigMaps("ns1").Get(f.ctx, "missing", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) || err.Error() != `configmaps "missing" not found` {
				t.Errorf("get missing: %v, want NotFound `configmaps \"missing\" not found`", err)
			}
			_, err = cs.CoreV1().ConfigMaps("ns2").Get(f.ctx, "a", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("get in another namespace: %v, want NotFound", err)
			}

			w, err := f.dynamic().Resource(widgetsGVR).Namespace("ns1").Get(f.ctx, "w", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get widget: %v", err)
			}
			if size, _, _ := unstructuredInt(w.Object, "spec", "size"); size != 3 || w.GetKind() != "Widget" {
				t.Errorf("widget = %v, want kind Widget with spec.size 3", w.Object)
			}
			st, err := f.dynamic().Resource(widgetsGVR).Namespace("ns1").Get(f.ctx, "w", metav1.GetOptions{}, "status")
			if err != nil || st.GetName() != "w" {
				t.Errorf("get widget status: %v, %v", st, err)
			}
			_, err = f.dynamic().Resource(widgetsGVR).Namespace("ns1").Get(f.ctx, "missing", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) || err.Error() != `widgets.example.com "missing" not found` {
				t.Errorf("get missing widget: %v", err)
			}
		})
	}
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	n, ok := cur.(int64)
	return n, ok, nil
}

func TestList(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, kind)
			f.seedConfigMap("ns1", "a", map[string]string{"app": "x"}, nil)
			f.seedConfigMap("ns1", "b", map[string]string{"app": "y"}, nil)
			f.seedConfigMap("ns1", "c", map[string]string{"app": "x"}, nil)
			f.seedConfigMap("ns2", "d", map[string]string{"app": "x"}, nil)
			cms := f.typed().CoreV1().ConfigMaps

			names := func(t *testing.T, ns string, opts metav1.ListOptions) []string {
				t.Helper()
				l, err := cms(ns).List(f.ctx, opts)
				if err != nil {
					t.Fatalf("list %q %+v: %v", ns, opts, err)
				}
				if l.ResourceVersion == "" {
					t.Errorf("list metadata = %+v, want a resourceVersion", l.ListMeta)
				}
				var out []string
				for _, i := range l.Items {
					out = append(out, i.Namespace+"/"+i.Name)
				}
				return out
			}
			for _, tc := range []struct {
				name string
				ns   string
				opts metav1.ListOptions
				want string
			}{
				{"namespace", "ns1", metav1.ListOptions{}, "ns1/a ns1/b ns1/c"},
				{"all namespaces", "", metav1.ListOptions{}, "ns1/a ns1/b ns1/c ns2/d"},
				{"rv=0", "ns1", metav1.ListOptions{ResourceVersion: "0"}, "ns1/a ns1/b ns1/c"},
				{"label selector", "", metav1.ListOptions{LabelSelector: "app=x"}, "ns1/a ns1/c ns2/d"},
				{"set-based selector", "ns1", metav1.ListOptions{LabelSelector: "app in (y)"}, "ns1/b"},
				{"field selector name", "", metav1.ListOptions{FieldSelector: "metadata.name=c"}, "ns1/c"},
				{"field selector namespace", "", metav1.ListOptions{FieldSelector: "metadata.namespace!=ns1"}, "ns2/d"},
				{"empty", "ns3", metav1.ListOptions{}, ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if got := strings.Join(names(t, tc.ns, tc.opts), " "); got != tc.want {
						t.Errorf("list = %q, want %q", got, tc.want)
					}
				})
			}

			t.Run("list kind", func(t *testing.T) {
				_, body := get(t, f.url+"/api/v1/configmaps", "")
				var tm metav1.TypeMeta
				if err := json.Unmarshal(body, &tm); err != nil || tm.Kind != "ConfigMapList" || tm.APIVersion != "v1" {
					t.Errorf("list = %s, want a v1 ConfigMapList", body)
				}
			})

			t.Run("paging", func(t *testing.T) {
				first, err := cms("").List(f.ctx, metav1.ListOptions{Limit: 3})
				if err != nil {
					t.Fatal(err)
				}
				if len(first.Items) != 3 || first.Continue == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 1 {
					t.Fatalf("first page = %d items, continue %q, remaining %v; want 3, a token, 1", len(first.Items), first.Continue, first.RemainingItemCount)
				}
				f.seedConfigMap("ns2", "e", nil, nil)
				second, err := cms("").List(f.ctx, metav1.ListOptions{Limit: 3, Continue: first.Continue})
				if err != nil {
					t.Fatal(err)
				}
				// The token pins the first page's revision: e is not there.
				if len(second.Items) != 1 || second.Items[0].Name != "d" || second.Continue != "" || second.ResourceVersion != first.ResourceVersion {
					t.Errorf("second page = %v continue %q rv %s; want [d], no token, rv %s", second.Items, second.Continue, second.ResourceVersion, first.ResourceVersion)
				}
			})

			for _, tc := range []struct {
				name, query string
				code        int
				reason      metav1.StatusReason
				message     string
			}{
				{"bad label selector", "labelSelector=app%3D%3D%3Dx", 400, metav1.StatusReasonBadRequest, "unable to parse requirement"},
				{"unsupported field", "fieldSelector=spec.x%3Dy", 400, metav1.StatusReasonBadRequest, `"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"`},
				{"match without rv", "resourceVersionMatch=NotOlderThan", 422, metav1.StatusReasonInvalid, "resourceVersionMatch is forbidden unless resourceVersion is provided"},
				{"exact at rv 0", "resourceVersion=0&resourceVersionMatch=Exact", 422, metav1.StatusReasonInvalid, `resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
				{"unknown match", "resourceVersion=1&resourceVersionMatch=Newest", 422, metav1.StatusReasonInvalid, "Unsupported value"},
				{"send initial events on list", "sendInitialEvents=true", 422, metav1.StatusReasonInvalid, "sendInitialEvents is forbidden for list"},
				{"continue with rv", "continue=abc&resourceVersion=5", 400, metav1.StatusReasonBadRequest, ""},
				{"bad continue", "continue=abc", 400, metav1.StatusReasonBadRequest, "continue key is not valid"},
				{"bad limit", "limit=x", 400, metav1.StatusReasonBadRequest, ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					st := getStatus(t, f.url+"/api/v1/namespaces/ns1/configmaps?"+tc.query, "")
					if int(st.Code) != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.message) {
						t.Errorf("status = %d %s %q, want %d %s containing %q", st.Code, st.Reason, st.Message, tc.code, tc.reason, tc.message)
					}
				})
			}

			t.Run("widgets by dynamic client", func(t *testing.T) {
				f.seedWidget("ns1", "w1", 1)
				f.seedWidget("ns2", "w2", 2)
				l, err := f.dynamic().Resource(widgetsGVR).List(f.ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(l.Items) != 2 || l.GetKind() != "WidgetList" || l.GetResourceVersion() == "" {
					t.Errorf("widgets = %d items kind %q rv %q, want 2 WidgetList with rv", len(l.Items), l.GetKind(), l.GetResourceVersion())
				}
			})
		})
	}
}

// getStatus GETs url with accept and decodes the Status it answers.
func getStatus(t *testing.T, url, accept string) metav1.Status {
	t.Helper()
	resp, body := get(t, url, accept)
	// Written in the form the request negotiated, as kube writes errors.
	var st metav1.Status
	var err error
	switch resp.Header.Get("Content-Type") {
	case kubeproto.MediaType:
		_, _, err = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(body, nil, &st)
		st.Kind = "Status"
	case "application/yaml":
		err = yaml.Unmarshal(body, &st)
	default:
		err = json.Unmarshal(body, &st)
	}
	if err != nil || st.Kind != "Status" {
		t.Fatalf("GET %s: %d %s is not a Status: %v", url, resp.StatusCode, body, err)
	}
	if int(st.Code) != resp.StatusCode {
		t.Errorf("status code %d in a %d response", st.Code, resp.StatusCode)
	}
	return st
}

func get(t testing.TB, url, accept string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}
