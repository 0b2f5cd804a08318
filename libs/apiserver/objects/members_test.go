package objects_test

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	"kplane.dev/libs/apiserver/objects"
)

// meta is what the gateway's audit reads of a request body.
type meta struct {
	Metadata struct {
		Name, Namespace, UID, ResourceVersion string
		Labels                                map[string]string
	}
}

func TestMembers(t *testing.T) {
	tests := []struct {
		data string
		want []string
		ok   bool
	}{
		{`{"apiVersion":"v1","metadata":{"name":"a"},"data":{"k":"}"}}`, []string{`{"name":"a"}`}, true},
		{` { "data" : {"metadata":1} , "Metadata" : {"name":"a"} , "METADATA":null } `, []string{`{"name":"a"}`, `null`}, true},
		{`{}`, nil, true},
		{`{"data":"x"}`, nil, true},
		{`{"metadata":[1,{"a":"]"}]}`, []string{`[1,{"a":"]"}]`}, true},
		{`{"met\u0061data":{}}`, nil, false},
		{`{"métadata":{}}`, nil, false},
		{`[]`, nil, false},
		{`null`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.data, func(t *testing.T) {
			got, ok := objects.Members([]byte(tt.data), "metadata")
			var gotS []string
			for _, v := range got {
				gotS = append(gotS, string(v))
			}
			if ok != tt.ok || !reflect.DeepEqual(gotS, tt.want) {
				t.Errorf("Members = %q, %v; want %q, %v", gotS, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzMembers: decoding the members Members finds, in order, into a
// struct gives what encoding/json gives decoding the whole object into
// it, duplicates and case folding included.
func FuzzMembers(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"metadata":{"name":"a"},"Metadata":{"namespace":"b"},"METADATA":{"name":"c"}}`))
	f.Add([]byte(`{"metadata":{"name":"a"},"metadata":null}`))
	f.Add([]byte(`{"metadata":{"name":"a","Name":"b","labels":{"x":"y"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var whole meta
		wholeErr := json.Unmarshal(data, &whole)
		values, ok := objects.Members(data, "metadata")
		if !ok {
			return
		}
		var parts meta
		var partsErr error
		for _, v := range values {
			if partsErr = json.Unmarshal(v, &parts.Metadata); partsErr != nil {
				break
			}
		}
		if (wholeErr == nil) != (partsErr == nil) {
			t.Fatalf("whole: %v; by members: %v", wholeErr, partsErr)
		}
		if wholeErr == nil && !reflect.DeepEqual(whole, parts) {
			t.Fatalf("whole %+v, by members %+v", whole, parts)
		}
	})
}

func TestMembersExact(t *testing.T) {
	data := []byte(` { "Metadata" : {"name":"a"} , "metadata" : {"name":"b"}, "data":{"metadata":1}, "metadata":null } `)
	got, ok := objects.MembersExact(data, "metadata")
	if want := [][]byte{[]byte(`{"name":"b"}`), []byte(`null`)}; !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("MembersExact = %q, %v; want %q, true", got, ok, want)
	}
	if _, ok := objects.MembersExact([]byte(`{"met\u0061data":{}}`), "metadata"); ok {
		t.Error("MembersExact walked a key with an escape")
	}
}

// FuzzMembersExact: decoding the members MembersExact finds, in order,
// into ObjectMeta gives what sigs.k8s.io/json's case-sensitive decoding
// of the whole object into a struct with a metadata field gives.
func FuzzMembersExact(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"metadata":{"name":"a"},"Metadata":{"namespace":"b"},"metadata":{"labels":{"x":"y"}}}`))
	f.Add([]byte(`{"metadata":{"name":"a","Name":"b","ownerReferences":[{"uid":"u"}]},"metadata":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var whole struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		wholeErr := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &whole)
		values, ok := objects.MembersExact(data, "metadata")
		if !ok {
			return
		}
		var parts metav1.ObjectMeta
		var partsErr error
		for _, v := range values {
			if partsErr = sigsjson.UnmarshalCaseSensitivePreserveInts(v, &parts); partsErr != nil {
				break
			}
		}
		if (wholeErr == nil) != (partsErr == nil) {
			t.Fatalf("whole: %v; by members: %v", wholeErr, partsErr)
		}
		if wholeErr == nil && !reflect.DeepEqual(whole.Metadata, parts) {
			t.Fatalf("whole %+v, by members %+v", whole.Metadata, parts)
		}
	})
}

func TestWithoutMember(t *testing.T) {
	tests := []struct {
		data, want string
		ok         bool
	}{
		{`{"metadata":{"name":"a","managedFields":[{"m":"}"}]},"data":{"managedFields":1}}`, `{"metadata":{"name":"a"},"data":{"managedFields":1}}`, true},
		{` { "metadata" : { "managedFields" : [] , "name" : "a" } , "x" : 1 } `, ` { "metadata" : {"name" : "a"} , "x" : 1 } `, true},
		{`{"metadata":{"managedFields":[]}}`, `{"metadata":{}}`, true},
		{`{"metadata":{"managedFields":1,"managedFields":2,"name":"a"},"metadata":{"name":"b","managedFields":3}}`, `{"metadata":{"name":"a"},"metadata":{"name":"b"}}`, true},
		{`{"metadata":{"ManagedFields":1},"Metadata":{"managedFields":1}}`, `{"metadata":{"ManagedFields":1},"Metadata":{"managedFields":1}}`, true},
		{`{"metadata":null,"data":{}}`, `{"metadata":null,"data":{}}`, true},
		{`{"metadata":{"managedFi\u0065lds":1}}`, ``, false},
		{`[]`, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.data, func(t *testing.T) {
			got, ok := objects.WithoutMember([]byte(tt.data), "metadata", "managedFields")
			if ok != tt.ok || string(got) != tt.want {
				t.Errorf("WithoutMember = %s, %v; want %s, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzWithoutMember: what WithoutMember leaves decodes to what decoding
// the whole object into a map and deleting the member from its parent
// gives.
func FuzzWithoutMember(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"metadata":{"name":"a","managedFields":[{"manager":"m"}]},"metadata":{"managedFields":null}}`))
	f.Add([]byte(`{"metadata":{"managedFields":1},"metadata":7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		got, ok := objects.WithoutMember(data, "metadata", "managedFields")
		if !ok {
			return
		}
		var want map[string]any
		if json.Unmarshal(data, &want) != nil {
			return
		}
		if md, isMap := want["metadata"].(map[string]any); isMap {
			delete(md, "managedFields")
		}
		var have map[string]any
		if err := json.Unmarshal(got, &have); err != nil {
			t.Fatalf("WithoutMember(%s) = %s, not JSON: %v", data, got, err)
		}
		if !reflect.DeepEqual(have, want) {
			t.Fatalf("WithoutMember(%s) = %s, decodes to %v; want %v", data, got, have, want)
		}
	})
}
