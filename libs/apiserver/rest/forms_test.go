package rest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"kplane.dev/libs/apiserver/kubeproto"
)

// TestCustomResourceForms: a kind without protobuf code (a custom
// resource) is written in protobuf only as a meta.k8s.io kind, as
// kube-apiserver's custom resource handler does, which is how client-go's
// metadata informers (the garbage collector's) read it. Refusals and
// errors take the forms kube gives them, and a write refused for its
// Accept header writes nothing.
func TestCustomResourceForms(t *testing.T) {
	f := newWriteFixture(t)
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`)
	const (
		pb       = "application/vnd.kubernetes.protobuf"
		metadata = pb + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
		accepted = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
	)
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

	resp := getAccepting(t, f.url+widgets+"/w", metadata)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != pb {
		t.Fatalf("metadata in protobuf: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var pom metav1.PartialObjectMetadata
	if _, gvk, err := codec.Decode(body, nil, &pom); err != nil || pom.Name != "w" || gvk.Kind != "PartialObjectMetadata" {
		t.Fatalf("metadata in protobuf decodes to %v %+v (%v)", gvk, pom.ObjectMeta, err)
	}

	w := getAccepting(t, f.url+widgets+"?watch=true", metadata)
	defer w.Body.Close()
	if w.StatusCode != http.StatusOK || w.Header.Get("Content-Type") != kubeproto.StreamMediaType {
		t.Fatalf("watch of metadata: %d %s", w.StatusCode, w.Header.Get("Content-Type"))
	}
	frames := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(w.Body), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
	var ev metav1.WatchEvent
	if _, _, err := frames.Decode(nil, &ev); err != nil {
		t.Fatal(err)
	}
	if _, _, err := codec.Decode(ev.Object.Raw, nil, &pom); err != nil || ev.Type != "ADDED" || pom.Name != "w" {
		t.Fatalf("watch event %s of %+v (%v)", ev.Type, pom.ObjectMeta, err)
	}

	for _, tc := range []struct {
		name, method, path, accept, body string
		code                             int
		contentType, message             string
	}{
		{name: "object in protobuf", method: http.MethodGet, path: widgets + "/w", accept: pb,
			code: http.StatusNotAcceptable, contentType: pb, message: accepted},
		{name: "watch in protobuf", method: http.MethodGet, path: widgets + "?watch=true", accept: pb,
			code: http.StatusNotAcceptable, contentType: pb, message: accepted},
		{name: "watch in yaml", method: http.MethodGet, path: widgets + "?watch=true", accept: "application/yaml",
			code: http.StatusNotAcceptable, contentType: "application/yaml",
			message: "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"},
		{name: "missing, protobuf or json", method: http.MethodGet, path: widgets + "/nope", accept: pb + ", application/json",
			code: http.StatusNotFound, contentType: pb, message: `widgets.example.com "nope" not found`},
		{name: "missing, metadata", method: http.MethodGet, path: widgets + "/nope", accept: metadata,
			code: http.StatusNotFound, contentType: "application/json", message: `widgets.example.com "nope" not found`},
		{name: "missing, only a table", method: http.MethodGet, path: widgets + "/nope", accept: pb + ";as=Table;g=meta.k8s.io;v=v1",
			code: http.StatusNotAcceptable, contentType: "application/json", message: accepted},
		{name: "create in protobuf", method: http.MethodPost, path: widgets, accept: pb,
			body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"created"}}`,
			code: http.StatusNotAcceptable, contentType: pb, message: accepted},
		{name: "delete in protobuf", method: http.MethodDelete, path: widgets + "/w", accept: pb,
			code: http.StatusNotAcceptable, contentType: pb, message: accepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, f.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", tc.accept)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var st metav1.Status
			switch ct := resp.Header.Get("Content-Type"); ct {
			case pb:
				_, _, err = codec.Decode(body, nil, &st)
			case "application/yaml":
				err = yaml.Unmarshal(body, &st)
			default:
				err = json.Unmarshal(body, &st)
			}
			if err != nil || resp.StatusCode != tc.code || resp.Header.Get("Content-Type") != tc.contentType || st.Message != tc.message {
				t.Fatalf("%d %s %q (%v)\nwant %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), st.Message, err, tc.code, tc.contentType, tc.message)
			}
		})
	}
	if f.stored(t, "widgets", "ns", "created") != nil {
		t.Error("a create refused for its Accept header stored its object")
	}
	if f.stored(t, "widgets", "ns", "w") == nil {
		t.Error("a delete refused for its Accept header deleted its object")
	}
}
