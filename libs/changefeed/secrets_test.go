package changefeed_test

import (
	"context"
	"encoding/json"
	"testing"

	"kplane.dev/libs/changefeed"
	"kplane.dev/libs/storage"
	proto "kplane.dev/proto/changefeed"
)

// TestSecretData checks that a Secret's contents reach the stream only
// when the publisher is told to publish them, and that other objects keep
// fields of the same names.
func TestSecretData(t *testing.T) {
	const (
		secret    = `{"apiVersion":"v1","kind":"Secret","metadata":{"namespace":"ns","name":"s1"},"type":"Opaque","data":{"password":"c2VjcmV0"},"stringData":{"token":"plain"}}`
		configMap = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"c1"},"data":{"k":"v"}}`
	)
	tests := []struct {
		name     string
		opts     []changefeed.Option
		wantData bool
	}{
		{name: "metadata only by default"},
		{name: "whole with WithSecretData", opts: []changefeed.Option{changefeed.WithSecretData()}, wantData: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			for key, obj := range map[string]string{
				storage.NewKeys(prefix, "", "secrets").Object("ns", "s1"):    secret,
				storage.NewKeys(prefix, "", "configmaps").Object("ns", "c1"): configMap,
			} {
				if _, err := f.etcd.Put(context.Background(), key, obj); err != nil {
					t.Fatal(err)
				}
			}
			f.runPublisher(t, tt.opts...)
			events := f.subscribe(t, proto.SubjectRoot+".>", 0).waitUntil(t, "s1 and c1", func(es []proto.Event) bool {
				n := 0
				for _, e := range es {
					if e.Name == "s1" || e.Name == "c1" {
						n++
					}
				}
				return n == 2
			})
			for _, e := range events {
				var obj map[string]json.RawMessage
				if e.Name != "s1" && e.Name != "c1" {
					continue
				}
				if err := json.Unmarshal(e.Object, &obj); err != nil {
					t.Fatalf("decode %s: %v", e.Name, err)
				}
				_, data := obj["data"]
				_, stringData := obj["stringData"]
				switch {
				case e.Name == "c1" && !data:
					t.Errorf("ConfigMap c1 lost its data: %s", e.Object)
				case e.Name == "s1" && (data != tt.wantData || stringData != tt.wantData):
					t.Errorf("Secret s1 = %s, want data and stringData: %v", e.Object, tt.wantData)
				case e.Name == "s1" && string(obj["type"]) != `"Opaque"`:
					t.Errorf("Secret s1 lost its type: %s", e.Object)
				}
			}
		})
	}
}
