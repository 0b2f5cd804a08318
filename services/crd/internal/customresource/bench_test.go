package customresource_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/resource"
)

// BenchmarkWrite measures what a custom resource write costs crd before
// storage: decoding, pruning and defaulting, then validation by the
// schema, with and without the schema's three CEL rules, so that the
// difference is the CEL cost per write:
//
//	go test -run '^$' -bench Write ./internal/customresource/
func BenchmarkWrite(b *testing.B) {
	body := []byte(widget(`{"replicas":2,"maxReplicas":3,"mode":"slow","port":"http","name":"short","template":{"depth":1,"labels":{"a":"b"}},"ports":[{"name":"a","port":1},{"name":"b","port":1}]}`))
	withRules := widgetCRD(b)
	withoutRules := withRules.DeepCopy()
	for i := range withoutRules.Spec.Versions {
		spec := withoutRules.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		spec.XValidations = nil
		withoutRules.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	for _, tc := range []struct {
		name string
		r    *resource.Resource
	}{
		{name: "cel=none", r: widgetResources(b, withoutRules)["v1"]},
		{name: "cel=3rules", r: widgetResources(b, withRules)["v1"]},
	} {
		b.Run("create/"+tc.name, func(b *testing.B) {
			for b.Loop() {
				validate(b, tc.r, body, nil)
			}
		})
		b.Run("update/"+tc.name, func(b *testing.B) {
			old := decode(b, tc.r, []byte(strings.Replace(string(body), `"replicas":2`, `"replicas":1`, 1)))
			for b.Loop() {
				validate(b, tc.r, body, old)
			}
		})
	}
}

func decode(b *testing.B, r *resource.Resource, body []byte) runtime.Object {
	obj, err := r.Objects.DecodeRequest(body, resource.DecodeOptions{Strict: true})
	if err != nil {
		b.Fatalf("decode: %v", err)
	}
	return obj
}

// validate runs what the REST layer runs of the resource's own on a
// create (old nil) or an update.
func validate(b *testing.B, r *resource.Resource, body []byte, old runtime.Object) {
	ctx := context.Background()
	obj := decode(b, r, body)
	if old == nil {
		r.Strategy.PrepareForCreate(ctx, obj)
		if errs := r.Strategy.Validate(ctx, obj); len(errs) > 0 {
			b.Fatalf("validate: %v", errs)
		}
		return
	}
	r.Strategy.PrepareForUpdate(ctx, obj, old)
	if errs := r.Strategy.ValidateUpdate(ctx, obj, old); len(errs) > 0 {
		b.Fatalf("validate update: %v", errs)
	}
}
