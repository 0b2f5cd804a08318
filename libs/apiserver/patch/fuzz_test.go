package patch_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/resource"
)

// patchSeeds are bodies shaped like the ones kubectl and client-go send:
// kubectl patch --type json|merge|strategic, kubectl apply (client-side,
// whose strategic merge patch carries last-applied-configuration) and
// kubectl apply --server-side, plus the malformed neighbours of each.
var patchSeeds = []string{
	`[{"op":"add","path":"/metadata/labels/tier","value":"front"}]`,
	`[{"op":"replace","path":"/data/key","value":"v2"},{"op":"test","path":"/data/key","value":"v2"}]`,
	`[{"op":"remove","path":"/data/key"}]`,
	`[{"op":"move","from":"/data/key","path":"/data/moved"},{"op":"copy","from":"/data/moved","path":"/data/copied"}]`,
	`[{"op":"replace","path":"/spec/size","value":4}]`,
	`[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/f"}]`,
	`{"metadata":{"annotations":{"deployment.kubernetes.io/revision":"2"}},"data":{"key":null}}`,
	`{"spec":{"size":5,"color":null},"status":{"ready":false}}`,
	`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"key\":\"v2\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{},\"name\":\"a\",\"namespace\":\"ns\"}}\n"}},"data":{"key":"v2"}}`,
	`{"$setElementOrder/finalizers":["a","b"],"metadata":{"finalizers":["a","b"],"labels":{"$patch":"replace","x":"y"}}}`,
	`{"metadata":{"$retainKeys":["labels"],"labels":{"app":null}}}`,
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n  labels:\n    app: web\ndata:\n  key: value\n",
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"},"data":{"key":"value","k2":"v2"}}`,
	"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 3\n  parts: [a, b]\n",
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","managedFields":[{"manager":"x"}]}}`,
	`{"metadata":{"name":"b"}}`,
	`{"kind":"Secret","apiVersion":"v2"}`,
	`[{"op":"add"}]`,
	// json-patch v4.13.0 panics on a root replace or test without a value.
	`[{"op":"replace","path":""}]`,
	`[{"op":"test","path":""}]`,
	`[{"op":"replace","path":"","value":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}}]`,
	`[{"op":"replace","path":"/metadata/uid","value":"other"}]`,
	`{"data":{"key":1,"k":[1,{"a":null}]}}`,
	"a: [\n",
	"--- \n...\n",
	`{`, `[]`, `{}`, `null`, `"str"`, `1e400`, ``,
}

// FuzzPatch feeds every body to every patch type, against a typed
// ConfigMap and an unstructured custom resource, existing or not: a patch
// may fail, but only with a 4xx API status (or, under Warn, with a strict
// decoding error and the patched object), and what it returns must encode.
func FuzzPatch(f *testing.F) {
	for _, s := range patchSeeds {
		f.Add([]byte(s), uint8(0), false, false)
		f.Add([]byte(s), uint8(1), true, true)
	}
	cmRes, wRes := configMaps(f), widgets()
	cms, ws := newPatcher(f, cmRes), newPatcher(f, wRes)
	type target struct {
		p       *patch.Patcher
		objects resource.Objects
		stored  runtime.Object
		opts    patch.Options
	}
	targets := []target{
		{cms, cmRes.Objects, storedConfigMap(f, cms), cmOpts},
		{ws, wRes.Objects, storedWidget(f, ws), widgetOpts},
	}
	patchTypes := []types.PatchType{types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType}
	directives := []string{metav1.FieldValidationStrict, metav1.FieldValidationWarn, metav1.FieldValidationIgnore}

	f.Fuzz(func(t *testing.T, body []byte, directive uint8, missing, force bool) {
		for _, tg := range targets {
			for _, pt := range patchTypes {
				opts := tg.opts
				opts.FieldValidation = directives[int(directive)%len(directives)]
				opts.Force = force && pt == types.ApplyYAMLPatchType
				var current runtime.Object
				if !missing {
					current = tg.stored.DeepCopyObject()
				}
				obj, err := doPatch(tg.p, current, pt, body, opts)
				if runtime.IsStrictDecodingError(err) {
					if opts.FieldValidation != metav1.FieldValidationWarn || obj == nil {
						t.Fatalf("%s: strict decoding error %v under %s, object %v", pt, err, opts.FieldValidation, obj)
					}
					err = nil
				}
				if err != nil {
					status, ok := err.(apierrors.APIStatus)
					if !ok {
						t.Fatalf("%s of %q: error %v (%T) is not an API status", pt, body, err, err)
					}
					if code := status.Status().Code; code < 400 || code >= 500 {
						t.Fatalf("%s of %q: status %d %q, want a 4xx", pt, body, code, status.Status().Message)
					}
					continue
				}
				if _, err := tg.objects.Encode(obj); err != nil {
					t.Fatalf("%s of %q: patched object does not encode: %v", pt, body, err)
				}
			}
		}
	})
}
