package rest_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// TestGetEncoding: a get, whose encoding is shared with other reads of
// the same state (see encodingCache), is byte for byte what json.Marshal
// or kube's protobuf writes for the object, shows its latest state after
// each write, and still answers YAML and pretty JSON in full.
func TestGetEncoding(t *testing.T) {
	f := newWriteFixture(t)
	f.create(t, cms, `{"metadata":{"name":"a"},"data":{"html":"<&>","k":"0"}}`)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pb := protobuf.NewSerializer(scheme, scheme)
	get := func(t *testing.T, accept, query string) (string, []byte) {
		t.Helper()
		resp := getAccepting(t, f.url+cms+"/a"+query, accept)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Length") != fmt.Sprint(len(data)) {
			t.Fatalf("get %s%s: %d, Content-Length %q for %d bytes: %s", accept, query, resp.StatusCode, resp.Header.Get("Content-Length"), len(data), data)
		}
		return resp.Header.Get("Content-Type"), data
	}
	for round := range 3 {
		if round > 0 {
			if r := f.do(t, http.MethodPatch, cms+"/a", mergeType, fmt.Sprintf(`{"data":{"k":"%d"}}`, round)); r.code != http.StatusOK {
				t.Fatalf("patch: %d %s", r.code, r.body)
			}
		}
		// Twice: the second get is answered from what the first encoded.
		for range 2 {
			_, data := get(t, "application/json", "")
			cm := wantMarshalled[corev1.ConfigMap](t, data)
			if cm.Data["k"] != fmt.Sprint(round) || cm.Data["html"] != "<&>" {
				t.Fatalf("round %d: data %v, want k=%d", round, cm.Data, round)
			}

			contentType, data := get(t, "application/vnd.kubernetes.protobuf", "")
			obj, _, err := pb.Decode(data, nil, nil)
			if err != nil || contentType != "application/vnd.kubernetes.protobuf" {
				t.Fatalf("protobuf get (%s): %v", contentType, err)
			}
			again, err := runtime.Encode(pb, obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(data) || obj.(*corev1.ConfigMap).Data["k"] != fmt.Sprint(round) {
				t.Fatalf("round %d: protobuf get is not kube's encoding of the latest state: %v", round, obj)
			}
		}
	}
	if _, data := get(t, "application/yaml", ""); !strings.Contains(string(data), "\n  html: <&>\n") {
		t.Fatalf("yaml get:\n%s", data)
	}
	if _, data := get(t, "application/json", "?pretty=true"); !strings.Contains(string(data), "\n  \"data\": {\n") {
		t.Fatalf("pretty get:\n%s", data)
	}
}
