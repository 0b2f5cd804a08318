package server_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kubectlTable is the Accept header of `kubectl get`.
const kubectlTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

func TestOutputForms(t *testing.T) {
	f := newFixture(t, direct)
	f.seedConfigMap("ns1", "a", nil, map[string]string{"k1": "v", "k2": "v"})
	f.seedConfigMap("ns1", "b", nil, nil)
	f.seedWidget("ns1", "w", 7)
	cms := f.url + "/api/v1/namespaces/ns1/configmaps"

	t.Run("table of a list", func(t *testing.T) {
		resp, body := get(t, cms, kubectlTable)
		var tbl metav1.Table
		if err := json.Unmarshal(body, &tbl); err != nil {
			t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
		}
		if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" || tbl.ResourceVersion == "" {
			t.Errorf("table meta = %+v %+v", tbl.TypeMeta, tbl.ListMeta)
		}
		if got := columnNames(tbl); got != "Name Data Age" {
			t.Errorf("columns = %q, want Name Data Age", got)
		}
		if len(tbl.Rows) != 2 {
			t.Fatalf("rows = %d, want 2", len(tbl.Rows))
		}
		if c := tbl.Rows[0].Cells; c[0] != "a" || c[1] != float64(2) || c[2] != "60s" {
			t.Errorf("row a = %v, want [a 2 60s]", c)
		}
		var partial metav1.PartialObjectMetadata
		if err := json.Unmarshal(tbl.Rows[0].Object.Raw, &partial); err != nil || partial.Kind != "PartialObjectMetadata" || partial.Name != "a" {
			t.Errorf("row object = %s, want a PartialObjectMetadata of a (%v)", tbl.Rows[0].Object.Raw, err)
		}
	})

	t.Run("table include object", func(t *testing.T) {
		for _, tc := range []struct {
			include, wantKind string
		}{
			{"None", ""},
			{"Metadata", "PartialObjectMetadata"},
			{"Object", "ConfigMap"},
		} {
			_, body := get(t, cms+"/a?includeObject="+tc.include, kubectlTable)
			var tbl metav1.Table
			if err := json.Unmarshal(body, &tbl); err != nil || len(tbl.Rows) != 1 {
				t.Fatalf("includeObject=%s: %s (%v)", tc.include, body, err)
			}
			var tm metav1.TypeMeta
			if raw := tbl.Rows[0].Object.Raw; len(raw) > 0 && string(raw) != "null" {
				if err := json.Unmarshal(raw, &tm); err != nil {
					t.Fatal(err)
				}
			}
			if tm.Kind != tc.wantKind {
				t.Errorf("includeObject=%s: row object kind %q, want %q", tc.include, tm.Kind, tc.wantKind)
			}
		}
		st := getStatus(t, cms+"?includeObject=All", kubectlTable)
		if st.Code != 400 || !strings.Contains(st.Message, "Unable to convert to Table as requested") {
			t.Errorf("includeObject=All: %d %q", st.Code, st.Message)
		}
	})

	t.Run("unstructured table with jsonpath column", func(t *testing.T) {
		_, body := get(t, f.url+"/apis/example.com/v1/namespaces/ns1/widgets", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")
		var tbl metav1.Table
		if err := json.Unmarshal(body, &tbl); err != nil {
			t.Fatal(err)
		}
		if tbl.APIVersion != "meta.k8s.io/v1beta1" || columnNames(tbl) != "Name Size" || len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != float64(7) {
			t.Errorf("widgets table = %s", body)
		}
	})

	t.Run("yaml", func(t *testing.T) {
		resp, body := get(t, cms+"/a", "application/yaml")
		var m map[string]any
		if err := yaml.Unmarshal(body, &m); err != nil || resp.Header.Get("Content-Type") != "application/yaml" || m["kind"] != "ConfigMap" {
			t.Errorf("yaml = %s %q (%v)", body, resp.Header.Get("Content-Type"), err)
		}
		if strings.HasPrefix(strings.TrimSpace(string(body)), "{") {
			t.Errorf("yaml body is JSON: %s", body)
		}
	})

	t.Run("protobuf preferred, json accepted", func(t *testing.T) {
		resp, body := get(t, cms+"/a", "application/vnd.kubernetes.protobuf, application/json")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !bytes.HasPrefix(body, []byte("k8s\x00")) {
			t.Errorf("built-in kind: got %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		// A custom resource has no protobuf, as in kube.
		resp, body = get(t, f.url+"/apis/example.com/v1/namespaces/ns1/widgets/w", "application/vnd.kubernetes.protobuf, application/json")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !json.Valid(body) {
			t.Errorf("custom resource: got %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	})

	t.Run("not acceptable", func(t *testing.T) {
		for _, accept := range []string{
			"text/html",
			"application/json;as=Foo;v=v1;g=meta.k8s.io",
			"application/json;as=Table;v=v2;g=meta.k8s.io",
			"application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
		} {
			st := getStatus(t, cms, accept)
			if st.Code != 406 || st.Reason != metav1.StatusReasonNotAcceptable || st.Message != "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf" {
				t.Errorf("Accept %q: %d %s %q", accept, st.Code, st.Reason, st.Message)
			}
		}
		st := getStatus(t, f.url+"/apis/example.com/v1/namespaces/ns1/widgets", "application/vnd.kubernetes.protobuf")
		if st.Code != 406 || st.Message != "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf" {
			t.Errorf("protobuf of a custom resource: %d %q", st.Code, st.Message)
		}
		st = getStatus(t, cms+"/a", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
		if st.Code != 406 || !strings.HasPrefix(st.Message, "you requested PartialObjectMetadataList, but the requested object is not a list") {
			t.Errorf("PartialObjectMetadataList of one object: %d %q", st.Code, st.Message)
		}
	})

	t.Run("metadata client", func(t *testing.T) {
		mc := f.metadata().Resource(configMapsGVR).Namespace("ns1")
		p, err := mc.Get(f.ctx, "a", metav1.GetOptions{})
		if err != nil || p.Name != "a" || p.UID == "" {
			t.Fatalf("metadata get = %+v, %v", p, err)
		}
		l, err := mc.List(f.ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 2 || l.ResourceVersion == "" || l.Items[1].Name != "b" {
			t.Fatalf("metadata list = %+v, %v", l, err)
		}
		w, err := f.metadata().Resource(widgetsGVR).Namespace("ns1").Get(f.ctx, "w", metav1.GetOptions{})
		if err != nil || w.Name != "w" {
			t.Fatalf("metadata get widget = %+v, %v", w, err)
		}
	})

	t.Run("partial object metadata", func(t *testing.T) {
		_, body := get(t, cms+"/a", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
		var p metav1.PartialObjectMetadata
		if err := json.Unmarshal(body, &p); err != nil || p.Kind != "PartialObjectMetadata" || p.APIVersion != "meta.k8s.io/v1" || p.Name != "a" {
			t.Errorf("partial object metadata = %s (%v)", body, err)
		}
		st := getStatus(t, cms, "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
		if st.Code != 406 || !strings.HasPrefix(st.Message, "you requested PartialObjectMetadata, but the requested object is a list") {
			t.Errorf("PartialObjectMetadata of a list: %d %q", st.Code, st.Message)
		}
	})

	t.Run("pretty", func(t *testing.T) {
		_, body := get(t, cms+"/a?pretty=true", "")
		if !strings.Contains(string(body), "\n  \"kind\": \"ConfigMap\"") {
			t.Errorf("pretty body = %s", body)
		}
	})
}

func columnNames(tbl metav1.Table) string {
	var names []string
	for _, c := range tbl.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return strings.Join(names, " ")
}
