package changefeed

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	proto "kplane.dev/proto/changefeed"
)

var secretFields = []string{"data", "stringData"}

func TestServedObject(t *testing.T) {
	tests := []struct {
		name, stored  string
		drop          []string
		want          string // decodes to the served object; "" for an error
		version, kind string
	}{
		{name: "core", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"n":"1"}}`,
			want: `{"apiVersion":"v1","data":{"n":"1"},"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"42"}}`, version: "v1", kind: "ConfigMap"},
		{name: "group", stored: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","resourceVersion":"7"}}`,
			want: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","resourceVersion":"42"}}`, version: "v1", kind: "Role"},
		{name: "resourceVersion first", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"7","name":"a"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"42"}}`, version: "v1", kind: "ConfigMap"},
		{name: "resourceVersion empty", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":""}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"42"}}`, version: "v1", kind: "ConfigMap"},
		{name: "resourceVersion twice", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"6","name":"a","resourceVersion":"7"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"42"}}`, version: "v1", kind: "ConfigMap"},
		{name: "empty metadata", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"42"}}`, version: "v1", kind: "ConfigMap"},
		{name: "null metadata", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":null}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"42"}}`, version: "v1", kind: "ConfigMap"},
		{name: "no metadata", stored: `{"apiVersion":"v1","kind":"ConfigMap"}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"42"}}`, version: "v1", kind: "ConfigMap"},
		{name: "empty object", stored: `{}`, want: `{"metadata":{"resourceVersion":"42"}}`},
		{name: "secret without its contents", drop: secretFields,
			stored: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"type":"Opaque","data":{"p":"c2VjcmV0"},"stringData":{"t":"plain"}}`,
			want:   `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","resourceVersion":"42"},"type":"Opaque"}`, version: "v1", kind: "Secret"},
		{name: "secret fields first and last", drop: secretFields,
			stored: `{"data":{"p":"c2VjcmV0"},"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"t":"plain"}}`,
			want:   `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","resourceVersion":"42"}}`, version: "v1", kind: "Secret"},
		{name: "secret contents given twice", drop: secretFields,
			stored: `{"data":{"p":"MQ=="},"apiVersion":"v1","kind":"Secret","data":{"p":"Mg=="},"metadata":{"name":"s"}}`,
			want:   `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","resourceVersion":"42"}}`, version: "v1", kind: "Secret"},
		{name: "whitespace", stored: " \n{ \"apiVersion\" : \"v1\" ,\t\"kind\":\"ConfigMap\",\r\n \"metadata\" : { \"name\" : \"a\" , \"resourceVersion\" : \"7\" } , \"data\" : { \"k\" : [ 1 , 2.5e3 , true , null ] } } \n",
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"42"},"data":{"k":[1,2500,true,null]}}`, version: "v1", kind: "ConfigMap"},
		{name: "escapes in values", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","annotations":{"q":"\"},\\\"resourceVersion\\\":\"1\"}\\"}},"data":{"k":"\\\"}\u0022{<&>\u2028"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","annotations":{"q":"\"},\\\"resourceVersion\\\":\"1\"}\\"},"resourceVersion":"42"},"data":{"k":"\\\"}\"{<&>\u2028"}}`, version: "v1", kind: "ConfigMap"},
		{name: "escaped keys", stored: `{"api\u0056ersion":"v1","\u006bind":"ConfigMap","meta\u0064ata":{"name":"a","resource\u0056ersion":"7"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"42"}}`, version: "v1", kind: "ConfigMap"},
		{name: "escaped apiVersion and kind", stored: `{"apiVersion":"apps\/v1","kind":"Deploy\u006dent"}`,
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"resourceVersion":"42"}}`, version: "v1", kind: "Deployment"},
		{name: "resourceVersion elsewhere untouched",
			stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:metadata":{"resourceVersion":"1"}}}],"resourceVersion":"7","labels":{"resourceVersion":"2"}},"data":{"resourceVersion":"3"},"resourceVersion":"4","status":{"metadata":{"resourceVersion":"5"}}}`,
			want:   `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:metadata":{"resourceVersion":"1"}}}],"resourceVersion":"42","labels":{"resourceVersion":"2"}},"data":{"resourceVersion":"3"},"resourceVersion":"4","status":{"metadata":{"resourceVersion":"5"}}}`, version: "v1", kind: "ConfigMap"},
		{name: "data kept unless dropped", stored: `{"apiVersion":"v1","kind":"Secret","data":{"p":"MQ=="},"stringData":{"t":"x"}}`,
			want: `{"apiVersion":"v1","kind":"Secret","data":{"p":"MQ=="},"stringData":{"t":"x"},"metadata":{"resourceVersion":"42"}}`, version: "v1", kind: "Secret"},
		{name: "null apiVersion", stored: `{"apiVersion":null,"kind":"ConfigMap"}`,
			want: `{"apiVersion":null,"kind":"ConfigMap","metadata":{"resourceVersion":"42"}}`, kind: "ConfigMap"},
		{name: "not json", stored: `not json`},
		{name: "truncated", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}`},
		{name: "trailing comma", stored: `{"apiVersion":"v1","kind":"ConfigMap",}`},
		{name: "bad escape", stored: `{"apiVersion":"v1","kind":"Config\xMap"}`},
		{name: "two values", stored: `{"apiVersion":"v1"} {}`},
		{name: "empty", stored: ``},
		{name: "array", stored: `[{"apiVersion":"v1"}]`},
		{name: "null", stored: `null`},
		{name: "metadata not an object", stored: `{"apiVersion":"v1","kind":"ConfigMap","metadata":"a"}`},
		{name: "kind not a string", stored: `{"apiVersion":"v1","kind":7}`},
		{name: "bad apiVersion", stored: `{"apiVersion":"a/b/c","kind":"ConfigMap"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, version, kind, err := servedObject([]byte(tt.stored), 42, tt.drop)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("servedObject(%s) = %s, want an error", tt.stored, obj)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decode(t, []byte(tt.want)), decode(t, obj)); diff != "" || version != tt.version || kind != tt.kind {
				t.Errorf("served %q %q, want %q %q; object %s (-want +got):\n%s", version, kind, tt.version, tt.kind, obj, diff)
			}
			refObj, refVersion, refKind, err := referenceServedObject([]byte(tt.stored), 42, tt.drop)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			if diff := cmp.Diff(decode(t, refObj), decode(t, obj)); diff != "" || version != refVersion || kind != refKind {
				t.Errorf("served %q %q %s, the decoding one %q %q %s", version, kind, obj, refVersion, refKind, refObj)
			}
		})
	}
}

// TestServedObjectStoredOrder checks that the object keeps its members in
// the order stored, which is the order kube-apiserver serves them in.
func TestServedObjectStoredOrder(t *testing.T) {
	stored := storedConfigMap(t)
	obj, _, _, err := servedObject(stored, 42, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(stored), `}]},"data":`, `}],"resourceVersion":"42"},"data":`, 1)
	if diff := cmp.Diff(want, string(obj)); diff != "" {
		t.Errorf("served object (-want +got):\n%s", diff)
	}
}

func TestEncode(t *testing.T) {
	obj, _, _, err := servedObject(storedConfigMap(t), 42, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []proto.Event{
		{Type: proto.Added, ResourceVersion: "42", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns", Name: "a<b>\"", Object: obj},
		{Type: proto.Deleted, ResourceVersion: "43", Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles", Kind: "Role", Name: "r"},
		{Type: proto.Resync, ResourceVersion: "44"},
	} {
		t.Run(string(e.Type), func(t *testing.T) {
			got, err := message{id: "x", event: e}.encode()
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decode(t, want), decode(t, got)); diff != "" {
				t.Errorf("encode() = %s (-json.Marshal +encode):\n%s", got, diff)
			}
			var back proto.Event
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if string(back.Object) != string(e.Object) {
				t.Errorf("object read back = %s, want %s", back.Object, e.Object)
			}
		})
	}
}

// FuzzServedObject checks servedObject against the decoding and encoding
// it replaced: the same version, kind and errors, and objects that
// decode alike.
func FuzzServedObject(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"},"data":{"k":"v"}}`), int64(42), false)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{},"data":{"p":"MQ=="},"stringData":{"t":"x"}}`), int64(1), true)
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":null,"data":{"resourceVersion":"3"}}`), int64(9), false)
	f.Add([]byte(` {"meta\u0064ata":{"resourceVersion":"1","resourceVersion":"2"},"metadata":{"x":[1,-2.5e-3,true,false,null]}} `), int64(0), true)
	f.Add([]byte(`{"kind":"\"\\\u00e9\ud800"}`), int64(-1), false)
	f.Add(storedConfigMap(f), int64(123456), false)
	f.Fuzz(func(t *testing.T, stored []byte, rev int64, secret bool) {
		var drop []string
		if secret {
			drop = secretFields
		}
		obj, version, kind, err := servedObject(stored, rev, drop)
		refObj, refVersion, refKind, refErr := referenceServedObject(stored, rev, drop)
		if (err != nil) != (refErr != nil) {
			t.Fatalf("servedObject(%q) error %v, the decoding one's %v", stored, err, refErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(obj) {
			t.Fatalf("servedObject(%q) = %q, not JSON", stored, obj)
		}
		if diff := cmp.Diff(decode(t, refObj), decode(t, obj)); diff != "" || version != refVersion || kind != refKind {
			t.Fatalf("servedObject(%q) = %q %q %s, the decoding one %q %q %s (-decoding +servedObject):\n%s", stored, version, kind, obj, refVersion, refKind, refObj, diff)
		}
	})
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{``, ` `, `0`, `-0.5e+7`, `01`, `1.`, `.5`, `1e`, `-`, `tru`, `nul`, `"\u12"`, `"\uD83D\uDE00"`, "\"\x01\"", `[1,]`, `{"a":}`, `{"a" 1}`, `{,}`, `[[[]]]`, `{"a":{"b":[1,{"c":null}]}}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := valid(b), json.Valid(b); got != want {
			t.Fatalf("valid(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}

func TestValidDepth(t *testing.T) {
	for _, n := range []int{maxDepth, maxDepth + 1} {
		b := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		if got, want := valid(b), json.Valid(b); got != want {
			t.Errorf("valid(%d nested arrays) = %v, json.Valid %v", n, got, want)
		}
	}
}

// referenceServedObject is servedObject as it was, decoding the object
// and its metadata into maps and encoding them again: what servedObject
// must agree with. It panicked on a null object or null metadata; here
// the first is an error, the second empty metadata, as in servedObject.
func referenceServedObject(stored []byte, rev int64, drop []string) (obj []byte, version, kind string, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stored, &top); err != nil {
		return nil, "", "", fmt.Errorf("decode stored object: %w", err)
	}
	if top == nil { // null: the old code panicked on it
		return nil, "", "", fmt.Errorf("decode stored object: null")
	}
	for _, f := range drop {
		delete(top, f)
	}
	var apiVersion string
	if raw, ok := top["apiVersion"]; ok {
		if err := json.Unmarshal(raw, &apiVersion); err != nil {
			return nil, "", "", fmt.Errorf("decode apiVersion: %w", err)
		}
	}
	if raw, ok := top["kind"]; ok {
		if err := json.Unmarshal(raw, &kind); err != nil {
			return nil, "", "", fmt.Errorf("decode kind: %w", err)
		}
	}
	metadata := map[string]json.RawMessage{}
	if raw, ok := top["metadata"]; ok {
		if err := json.Unmarshal(raw, &metadata); err != nil {
			return nil, "", "", fmt.Errorf("decode metadata: %w", err)
		}
	}
	if metadata == nil { // null: the old code panicked on it too
		metadata = map[string]json.RawMessage{}
	}
	metadata["resourceVersion"] = strconv.AppendQuote(nil, strconv.FormatInt(rev, 10))
	if top["metadata"], err = json.Marshal(metadata); err != nil {
		return nil, "", "", fmt.Errorf("encode metadata: %w", err)
	}
	if obj, err = json.Marshal(top); err != nil {
		return nil, "", "", fmt.Errorf("encode object: %w", err)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, "", "", fmt.Errorf("parse apiVersion %q: %w", apiVersion, err)
	}
	return obj, gv.Version, kind, nil
}

func decode(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// storedConfigMap is a ConfigMap as kplane stores it after a create by
// kubectl: about 1 KiB of data and the managed fields of the create.
func storedConfigMap(tb testing.TB) []byte {
	tb.Helper()
	created := metav1.NewTime(time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC))
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "load-000123", Namespace: "kplane-load-4f2a",
			UID:               types.UID("6b1f0a4e-3c2d-4e5f-8a9b-0c1d2e3f4a5b"),
			CreationTimestamp: created,
			Labels:            map[string]string{"app": "kplane-load", "round": "7"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kplane-load", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:config.yaml":{},"f:settings.json":{}},"f:metadata":{"f:labels":{".":{},"f:app":{},"f:round":{}}}}`)},
			}},
		},
		Data: map[string]string{
			"config.yaml":   strings.Repeat("key: a value of a few dozen bytes, like a config\n", 12),
			"settings.json": `{"resourceVersion":"1","nested":{"a":[1,2,3],"b":"x\"y"}}` + strings.Repeat(" ", 400),
		},
	}
	b, err := json.Marshal(cm)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func BenchmarkServedObject(b *testing.B) {
	stored := storedConfigMap(b)
	b.SetBytes(int64(len(stored)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := servedObject(stored, 123456, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChange measures the publisher's own work for one committed
// change: from the etcd watch event to the message payload.
func BenchmarkChange(b *testing.B) {
	p := NewPublisher(nil, nil, "/kplane")
	stored := storedConfigMap(b)
	events := []*clientv3.Event{{
		Type: mvccpb.PUT,
		Kv: &mvccpb.KeyValue{
			Key:   []byte("/kplane/registry/core/configmaps/kplane-load-4f2a/load-000123"),
			Value: stored, CreateRevision: 123456, ModRevision: 123456, Version: 1,
		},
	}}
	b.SetBytes(int64(len(stored)))
	b.ReportAllocs()
	for b.Loop() {
		msgs := p.changes(events)
		if len(msgs) != 1 {
			b.Fatalf("%d messages, want 1", len(msgs))
		}
		if _, err := msgs[0].encode(); err != nil {
			b.Fatal(err)
		}
	}
}
