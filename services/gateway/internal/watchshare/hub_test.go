package watchshare

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/apiserver/kubeproto"
)

func TestParse(t *testing.T) {
	var backend http.RoundTripper = http.DefaultTransport
	tests := []struct {
		name, target, accept string
		shared, state        bool
	}{
		{name: "from 0", target: "/api/v1/configmaps?watch=true&resourceVersion=0", shared: true, state: true},
		{name: "from a version, client-go's protobuf", target: "/api/v1/configmaps?watch=1&resourceVersion=12&timeoutSeconds=300&allowWatchBookmarks=true",
			accept: "application/vnd.kubernetes.protobuf,application/json", shared: true},
		{name: "selectors", target: "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=0&labelSelector=a%3Db&fieldSelector=metadata.name%3Dx", shared: true, state: true},
		{name: "latest state", target: "/api/v1/configmaps?watch=true"},
		{name: "initial events", target: "/api/v1/configmaps?watch=true&resourceVersion=0&sendInitialEvents=true"},
		{name: "version match", target: "/api/v1/configmaps?watch=true&resourceVersion=5&resourceVersionMatch=NotOlderThan"},
		{name: "table", target: "/api/v1/configmaps?watch=true&resourceVersion=0", accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
		{name: "bad version", target: "/api/v1/configmaps?watch=true&resourceVersion=x"},
		{name: "bad timeout", target: "/api/v1/configmaps?watch=true&resourceVersion=0&timeoutSeconds=-1"},
		{name: "repeated selector", target: "/api/v1/configmaps?watch=true&resourceVersion=0&labelSelector=a&labelSelector=b"},
		{name: "unknown parameter", target: "/api/v1/configmaps?watch=true&resourceVersion=0&pretty=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			if tt.accept != "" {
				r.Header.Set("Accept", tt.accept)
			}
			req, ok := parse(r, backend)
			if ok != tt.shared || ok && req.state != tt.state {
				t.Fatalf("parse: shared %v state %v, want %v %v", ok, req.state, tt.shared, tt.state)
			}
		})
	}
	// Watchers that differ only in their own parameters share a key.
	a, _ := parse(httptest.NewRequest(http.MethodGet, "/api/v1/configmaps?watch=true&resourceVersion=7&timeoutSeconds=5", nil), backend)
	b, _ := parse(httptest.NewRequest(http.MethodGet, "/api/v1/configmaps?resourceVersion=9&allowWatchBookmarks=true&watch=1", nil), backend)
	if a.key != b.key {
		t.Errorf("keys %+v and %+v differ", a.key, b.key)
	}
}

func configMap(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv},
		Data:       map[string]string{"k": "v"},
	}
}

// TestCodecs reads events as core frames them, in both encodings.
func TestCodecs(t *testing.T) {
	cm := configMap("a", "42")
	jsonObj, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	protoObj, err := kubeproto.Encode(cm)
	if err != nil {
		t.Fatal(err)
	}
	protoFrame, err := kubeproto.EventFrame("MODIFIED", protoObj)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mediaType string
		frame     []byte
		obj       []byte
	}{
		{"application/json", []byte(`{"type":"MODIFIED","object":` + string(jsonObj) + "}\n"), jsonObj},
		// Framed otherwise than core frames it.
		{"application/json", []byte(`{"object":` + string(jsonObj) + `,"type":"MODIFIED"}` + "\n"), jsonObj},
		{kubeproto.StreamMediaType, protoFrame, protoObj},
	}
	for _, tt := range tests {
		t.Run(tt.mediaType+" "+string(tt.frame[:3]), func(t *testing.T) {
			c, ok := newCodec(tt.mediaType, bytes.NewReader(append(bytes.Clone(tt.frame), tt.frame...)))
			if !ok {
				t.Fatal("no codec")
			}
			for range 2 {
				frame, h, err := c.read()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(frame, tt.frame) {
					t.Errorf("frame %q, want %q", frame, tt.frame)
				}
				if h.typ != "MODIFIED" || h.namespace != "ns" || h.name != "a" || h.version != "42" || !bytes.Equal(h.object, tt.obj) {
					t.Errorf("header %s %s/%s %s", h.typ, h.namespace, h.name, h.version)
				}
			}
			if _, _, err := c.read(); err != io.EOF {
				t.Errorf("read past the end: %v, want EOF", err)
			}
			added, err := c.added(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			_, h, err := mustCodec(t, tt.mediaType, added).read()
			if err != nil || h.typ != "ADDED" || h.name != "a" {
				t.Errorf("added frame reads as %s %s: %v", h.typ, h.name, err)
			}
		})
	}
	if _, ok := newCodec("application/json;as=Table;v=v1;g=meta.k8s.io", nil); ok {
		t.Error("a codec for tables")
	}
}

func mustCodec(t testing.TB, mediaType string, data []byte) codec {
	t.Helper()
	c, ok := newCodec(mediaType, bytes.NewReader(data))
	if !ok {
		t.Fatal("no codec")
	}
	return c
}

func testStream(t testing.TB, limits Limits, state bool) *stream {
	t.Helper()
	h, err := New(slog.New(slog.DiscardHandler), prometheus.NewRegistry(), limits)
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(h, request{key: key{state: state}, from: 10})
	// As open leaves it, on a stream of no events.
	s.codec, s.body, s.cancel = &jsonCodec{}, io.NopCloser(bytes.NewReader(nil)), func() {}
	return s
}

func change(typ, name, rv string) ([]byte, header) {
	obj, _ := json.Marshal(configMap(name, rv))
	return []byte(typ + " " + name + " " + rv), header{typ: typ, object: obj, namespace: "ns", name: name, version: rv}
}

func drain(w *watcher) []string {
	var got []string
	for {
		select {
		case data, ok := <-w.events:
			if !ok {
				return append(got, "closed")
			}
			got = append(got, string(data))
		default:
			return got
		}
	}
}

func TestStreamJoins(t *testing.T) {
	t.Run("from a version", func(t *testing.T) {
		s := testStream(t, Limits{History: 2, Buffer: 10}, false)
		first := s.add(request{from: 10}, 10)
		for _, e := range [][2]string{{"ADDED", "11"}, {"MODIFIED", "12"}, {"BOOKMARK", "14"}} {
			s.deliver(change(e[0], "a", e[1]))
		}
		if got := drain(first); len(got) != 2 {
			t.Errorf("first watcher got %q, want the two changes and no bookmark", got)
		}
		// History holds 11 and 12, and the bookmark moved the stream to 14.
		for _, tt := range []struct {
			from int64
			want int
		}{{9, -1}, {10, 2}, {11, 1}, {14, 0}, {15, -1}} {
			w := s.add(request{from: tt.from, bookmarks: true}, 10)
			if (w == nil) != (tt.want < 0) {
				t.Fatalf("from %d: joined %v, want %v", tt.from, w != nil, tt.want >= 0)
			}
			if w != nil {
				if got := drain(w); len(got) != tt.want {
					t.Errorf("from %d: caught up with %q, want %d events", tt.from, got, tt.want)
				}
			}
		}
		// One more event drops 11 from history: from 10 no longer joins.
		s.deliver(change("MODIFIED", "a", "15"))
		if w := s.add(request{from: 10}, 10); w != nil {
			t.Error("joined from 10 after its next change left history")
		}
		if w := s.add(request{from: 11}, 10); w == nil || len(drain(w)) != 2 {
			t.Error("from 11 does not catch up with 12 and 15")
		}
	})

	t.Run("from 0", func(t *testing.T) {
		s := testStream(t, Limits{StateBytes: 1 << 20, Buffer: 10}, true)
		s.add(request{key: key{state: true}}, 10)
		s.deliver(change("ADDED", "b", "11"))
		s.deliver(change("ADDED", "a", "12"))
		s.deliver(change("ADDED", "c", "13"))
		s.deliver(change("MODIFIED", "a", "14"))
		s.deliver(change("DELETED", "c", "15"))
		w := s.add(request{key: key{state: true}}, 10)
		var got []string
		for _, data := range drain(w) {
			_, h, err := mustCodec(t, "application/json", []byte(data)).read()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, h.typ+" "+h.name+" "+h.version)
		}
		if want := []string{"ADDED a 14", "ADDED b 11"}; !slices.Equal(got, want) {
			t.Errorf("state %q, want %q", got, want)
		}
	})

	t.Run("a state too large takes no one", func(t *testing.T) {
		s := testStream(t, Limits{StateBytes: 100, Buffer: 10}, true)
		s.add(request{key: key{state: true}}, 10)
		s.deliver(change("ADDED", "a", "11"))
		if w := s.add(request{key: key{state: true}}, 10); w != nil {
			t.Error("joined a stream whose state outgrew its limit")
		}
	})

	t.Run("a watcher a buffer behind is ended", func(t *testing.T) {
		s := testStream(t, Limits{History: 10, Buffer: 2}, false)
		slow := s.add(request{from: 10}, 2)
		var fast *watcher
		for i, rv := range []string{"11", "12", "13"} {
			if i == 2 {
				fast = s.add(request{from: 12}, 2)
			}
			s.deliver(change("MODIFIED", "a", rv))
		}
		if got := drain(slow); !slices.Equal(got, []string{"MODIFIED a 11", "MODIFIED a 12", "closed"}) {
			t.Errorf("slow watcher got %q, want two events and its end", got)
		}
		if got := drain(fast); !slices.Equal(got, []string{"MODIFIED a 13"}) {
			t.Errorf("other watcher got %q", got)
		}
		s.deliver(change("MODIFIED", "a", "14"))
		if got := drain(fast); !slices.Equal(got, []string{"MODIFIED a 14"}) {
			t.Errorf("other watcher after the slow one ended got %q", got)
		}
	})

	t.Run("an error ends joining", func(t *testing.T) {
		s := testStream(t, Limits{History: 10, Buffer: 10}, false)
		w := s.add(request{from: 10}, 10)
		s.deliver([]byte("ERROR"), header{typ: "ERROR"})
		if got := drain(w); !slices.Equal(got, []string{"ERROR"}) {
			t.Errorf("watcher got %q, want the error", got)
		}
		if s.add(request{from: 10}, 10) != nil {
			t.Error("joined a stream that failed")
		}
		cancelled := false
		s.cancel = func() { cancelled = true }
		s.leave(w)
		if !cancelled {
			t.Error("the last watcher of a failed stream left it open")
		}
	})
}
