package patch_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkPatch measures one patch of each type to a stored ConfigMap,
// managedFields included, as a PATCH request pays it.
func BenchmarkPatch(b *testing.B) {
	p := newPatcher(b, configMaps(b))
	stored := storedConfigMap(b, p)
	cases := []struct {
		name      string
		patchType types.PatchType
		body      string
	}{
		{"json", types.JSONPatchType, `[{"op":"replace","path":"/data/key","value":"v2"}]`},
		{"merge", types.MergePatchType, `{"data":{"key":"v2"}}`},
		{"strategic", types.StrategicMergePatchType, `{"data":{"key":"v2"}}`},
		{"apply", types.ApplyYAMLPatchType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  other: v2\n"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := doPatch(p, stored.DeepCopy(), tc.patchType, body, cmOpts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUpdateManagedFields measures the managedFields bookkeeping of an
// update (PUT) that changes one key.
func BenchmarkUpdateManagedFields(b *testing.B) {
	p := newPatcher(b, configMaps(b))
	live := storedConfigMap(b, p)
	obj := live.DeepCopy()
	obj.Data["key"] = "v2"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Update(live, obj.DeepCopy(), "editor", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNew measures building a Patcher for ConfigMaps from the shared
// built-in definitions, which a service pays once per resource at start.
func BenchmarkNew(b *testing.B) {
	r := configMaps(b)
	b.ReportAllocs()
	for b.Loop() {
		newPatcher(b, r)
	}
}
