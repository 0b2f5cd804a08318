package server_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
)

const watchList = "/api/v1/namespaces/ns1/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5"

// blueprintKey is kube-apiserver's annotation of the list blueprint.
const blueprintKey = "kubernetes.io/initial-events-list-blueprint"

// openWatch starts a watch with accept and fails unless it is answered
// with contentType.
func openWatch(t *testing.T, url, accept, contentType string) io.ReadCloser {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contentType {
		t.Fatalf("watch with Accept %q: %d %q, want 200 %q", accept, resp.StatusCode, resp.Header.Get("Content-Type"), contentType)
	}
	return resp.Body
}

// TestWatchListBlueprint shows the bookmark that ends a watch-list's
// initial events carrying, as kube-apiserver's does, an empty list of the
// resource in the stream's own encoding: client-go 1.32 builds the list
// a List call returns from it.
func TestWatchListBlueprint(t *testing.T) {
	f := newFixture(t, cached)
	f.seedConfigMap("ns1", "a", nil, map[string]string{"k": "v"})

	t.Run("json", func(t *testing.T) {
		dec := json.NewDecoder(openWatch(t, f.url+watchList, "application/json", "application/json"))
		for {
			var ev struct {
				Type   string
				Object struct {
					Metadata metav1.ObjectMeta
				}
			}
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("no initial-events-end bookmark: %v", err)
			}
			if ev.Type != "BOOKMARK" || ev.Object.Metadata.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(ev.Object.Metadata.Annotations[blueprintKey])
			if err != nil {
				t.Fatal(err)
			}
			var list map[string]any
			if err := json.Unmarshal(raw, &list); err != nil || list["kind"] != "ConfigMapList" || list["apiVersion"] != "v1" {
				t.Fatalf("blueprint %s (%v), want an empty v1 ConfigMapList", raw, err)
			}
			if items, ok := list["items"].([]any); !ok || len(items) != 0 {
				t.Errorf("blueprint items %v, want []", list["items"])
			}
			return
		}
	})

	t.Run("protobuf", func(t *testing.T) {
		body := openWatch(t, f.url+watchList, "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf;stream=watch")
		events := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(body), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
		objects := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
		for {
			ev := &metav1.WatchEvent{}
			if _, _, err := events.Decode(nil, ev); err != nil {
				t.Fatalf("no initial-events-end bookmark: %v", err)
			}
			obj, _, err := objects.Decode(ev.Object.Raw, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			cm, ok := obj.(*corev1.ConfigMap)
			if ev.Type != "BOOKMARK" || !ok || cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(cm.Annotations[blueprintKey])
			if err != nil {
				t.Fatal(err)
			}
			list, _, err := objects.Decode(raw, nil, nil)
			if l, ok := list.(*corev1.ConfigMapList); err != nil || !ok || len(l.Items) != 0 {
				t.Fatalf("blueprint %T %v (%v), want an empty ConfigMapList in protobuf", list, list, err)
			}
			return
		}
	})

	t.Run("no table", func(t *testing.T) {
		st := getStatus(t, f.url+watchList, "application/json;as=Table;v=v1;g=meta.k8s.io")
		if st.Code != http.StatusNotAcceptable {
			t.Errorf("watch-list as a table: %d %q, want 406", st.Code, st.Message)
		}
		// Accepting JSON too, the client gets JSON.
		_ = openWatch(t, f.url+watchList, "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "application/json")
	})
}
