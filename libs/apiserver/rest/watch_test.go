package rest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
)

// openWatch starts a watch of the fixture's ConfigMaps in the form accept
// names and returns its body.
func openWatch(t *testing.T, f *writeFixture, accept string) io.ReadCloser {
	t.Helper()
	resp := getAccepting(t, f.url+cms+"?watch=true", accept)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp.Body
}

// getAccepting sends a GET of url asking for accept; the caller closes
// the body.
func getAccepting(t *testing.T, url, accept string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestWatchEventFrames: watches of the same changes get the same bytes (encoded once, see encodingCache), and each JSON line is
// exactly what json.Marshal writes for a metav1.WatchEvent, as before the
// encoding was shared and as kube-apiserver writes it; protobuf frames
// decode to the same events.
func TestWatchEventFrames(t *testing.T) {
	f := newWriteFixture(t)
	first, second := openWatch(t, f, "application/json"), openWatch(t, f, "application/json")
	proto := openWatch(t, f, "application/vnd.kubernetes.protobuf;stream=watch")

	f.create(t, cms, `{"metadata":{"name":"w"},"data":{"html":"<a href=\"x\">&amp;</a>","u":"\u00e9\u2028"}}`)
	if r := f.do(t, http.MethodPatch, cms+"/w", mergeType, `{"data":{"k":"v"}}`); r.code != http.StatusOK {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	if r := f.do(t, http.MethodDelete, cms+"/w", "", ""); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}

	a, b := bufio.NewReader(first), bufio.NewReader(second)
	frames := protobuf.LengthDelimitedFramer.NewFrameReader(proto)
	events := streaming.NewDecoder(frames, protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
	decoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for _, typ := range []string{"ADDED", "MODIFIED", "DELETED"} {
		line, err := a.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		other, err := b.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(line, other) {
			t.Fatalf("two watches got different %s events:\n%s\n%s", typ, line, other)
		}
		var ev metav1.WatchEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("%s event %q: %v", typ, line, err)
		}
		var cm corev1.ConfigMap
		if err := json.Unmarshal(ev.Object.Raw, &cm); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Object: &cm}})
		if err != nil {
			t.Fatal(err)
		}
		if string(line) != string(want)+"\n" {
			t.Fatalf("%s event line\n%s\nwant json.Marshal's\n%s", typ, line, want)
		}

		var pev metav1.WatchEvent
		if _, _, err := events.Decode(nil, &pev); err != nil {
			t.Fatalf("protobuf %s event: %v", typ, err)
		}
		obj, _, err := decoder.Decode(pev.Object.Raw, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		pcm, ok := obj.(*corev1.ConfigMap)
		if pev.Type != typ || !ok || pcm.ResourceVersion != cm.ResourceVersion || pcm.Data["html"] != cm.Data["html"] {
			t.Fatalf("protobuf event %s %#v, want %s of %#v", pev.Type, obj, typ, &cm)
		}
	}
}

// wantMarshalled decodes data, a response, into a T and fails t unless
// data is what json.Marshal writes for it, and a newline.
func wantMarshalled[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(&v)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(want)+"\n" {
		t.Fatalf("response\n%s\nwant json.Marshal's\n%s", data, want)
	}
	return v
}

// TestListEncoding: a list whose items' encodings are shared (see
// encodingCache) is byte for byte what json.Marshal writes for it, and
// shows each object's latest state.
func TestListEncoding(t *testing.T) {
	f := newWriteFixture(t)
	if r := f.do(t, http.MethodGet, cms, "", ""); r.code != http.StatusOK || string(r.body) != `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"`+r.meta(t).GetResourceVersion()+`"},"items":[]}`+"\n" {
		t.Fatalf("empty list: %d %s", r.code, r.body)
	}
	f.create(t, cms, `{"metadata":{"name":"a"},"data":{"html":"<&>"}}`)
	f.create(t, cms, `{"metadata":{"name":"b"},"data":{"k":"1"}}`)
	for round := range 3 {
		if r := f.do(t, http.MethodPatch, cms+"/b", mergeType, fmt.Sprintf(`{"data":{"k":"%d"}}`, round)); r.code != http.StatusOK {
			t.Fatalf("patch: %d %s", r.code, r.body)
		}
		r := f.do(t, http.MethodGet, cms, "", "")
		if r.code != http.StatusOK {
			t.Fatalf("list: %d %s", r.code, r.body)
		}
		list := wantMarshalled[corev1.ConfigMapList](t, r.body)
		if len(list.Items) != 2 || list.Items[0].Data["html"] != "<&>" || list.Items[1].Data["k"] != fmt.Sprint(round) {
			t.Fatalf("round %d: list %+v, want a and b with k=%d", round, list.Items, round)
		}
		if got := r.header.Get("Content-Length"); got != fmt.Sprint(len(r.body)) {
			t.Fatalf("Content-Length %q for %d bytes", got, len(r.body))
		}
	}
}
