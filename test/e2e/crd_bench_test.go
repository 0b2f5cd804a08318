package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kplane.dev/test/e2e/harness"
)

// benchCRD is a CRD whose objects carry what a ConfigMap of the bench
// carries (one data entry), under spec; rule, when set, is a CEL rule on
// spec, to measure what validating it costs a write.
func benchCRD(plural, rule string) string {
	validations := ""
	if rule != "" {
		validations = "\n            x-kubernetes-validations:\n            - rule: " + strconv.Quote(rule)
	}
	kind := strings.ToUpper(plural[:1]) + plural[1:len(plural)-1]
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.bench.example.com
spec:
  group: bench.example.com
  scope: Namespaced
  names: {plural: %[1]s, singular: %[2]s, kind: %[3]s}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              data:
                type: object
                additionalProperties: {type: string}%[4]s
`, plural, strings.ToLower(kind), kind, validations)
}

// benchKind is one kind the benchmark writes: its resource and how an
// object of it carries the counter the updates change.
type benchKind struct {
	name string
	gvr  schema.GroupVersionResource
	kind string
	// data is the path of the data map in the object.
	data []string
}

func (k benchKind) object(namespace, name, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(k.gvr.GroupVersion().String())
	u.SetKind(k.kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	if err := unstructured.SetNestedStringMap(u.Object, map[string]string{dataKey: value}, k.data...); err != nil {
		panic(err)
	}
	return u
}

// BenchmarkCustomResources compares custom resources with ConfigMaps of
// the same content through the gateway, with the same client (dynamic,
// JSON), one request at a time; crs-cel adds one CEL rule, so its writes
// minus crs's are the rule's cost:
//
//	go test -run '^$' -bench CustomResources -benchtime 200x ./e2e/
func BenchmarkCustomResources(b *testing.B) {
	sys := harness.Start(b)
	ctx := context.Background()
	file := b.TempDir() + "/crds.yaml"
	manifest := benchCRD("plains", "") + "---\n" + benchCRD("rules", "self.data.all(k, size(self.data[k]) < 64)")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		b.Fatal(err)
	}
	if _, errOut, err := sys.Kubectl(b, "apply", "-f", file); err != nil {
		b.Fatalf("create CRDs: %v\n%s", err, errOut)
	}
	if _, errOut, err := sys.Kubectl(b, "wait", "--for=condition=Established", "crd/plains.bench.example.com", "crd/rules.bench.example.com", "--timeout=60s"); err != nil {
		b.Fatalf("wait for CRDs: %v\n%s", err, errOut)
	}
	dyn, err := dynamic.NewForConfig(unthrottled(sys.RESTConfig(b)))
	if err != nil {
		b.Fatal(err)
	}
	kinds := []benchKind{
		{name: "configmaps", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, kind: "ConfigMap", data: []string{"data"}},
		{name: "crs", gvr: schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "plains"}, kind: "Plain", data: []string{"spec", "data"}},
		{name: "crs-cel", gvr: schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "rules"}, kind: "Rule", data: []string{"spec", "data"}},
	}
	// The custom resources are served once their discovery is: wait
	// until a create goes through.
	for _, k := range kinds {
		if err := eventually(ctx, eventTimeout, func(ctx context.Context) error {
			_, err := dyn.Resource(k.gvr).Namespace("default").Create(ctx, k.object("default", "probe", "0"), metav1.CreateOptions{})
			return err
		}); err != nil {
			b.Fatalf("%s not served: %v", k.name, err)
		}
		for i := range listSize {
			if _, err := dyn.Resource(k.gvr).Namespace("default").Create(ctx, k.object("default", fmt.Sprintf("listed-%d", i), "0"), metav1.CreateOptions{}); err != nil {
				b.Fatalf("create listed %s: %v", k.name, err)
			}
		}
	}
	runs := 0
	ops := []struct {
		name string
		run  func(b *testing.B, c dynamic.NamespaceableResourceInterface, k benchKind, prefix string)
	}{
		{name: "get", run: func(b *testing.B, c dynamic.NamespaceableResourceInterface, _ benchKind, _ string) {
			for b.Loop() {
				if _, err := c.Namespace("default").Get(ctx, "probe", metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{name: "list", run: func(b *testing.B, c dynamic.NamespaceableResourceInterface, _ benchKind, _ string) {
			for b.Loop() {
				if _, err := c.Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{name: "create", run: func(b *testing.B, c dynamic.NamespaceableResourceInterface, k benchKind, prefix string) {
			i := 0
			for b.Loop() {
				i++
				if _, err := c.Namespace("default").Create(ctx, k.object("default", prefix+"-"+strconv.Itoa(i), "0"), metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{name: "watch", run: func(b *testing.B, c dynamic.NamespaceableResourceInterface, k benchKind, prefix string) {
			obj, err := c.Namespace("default").Create(ctx, k.object("default", prefix+"-watched", "0"), metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			w, err := c.Namespace("default").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", obj.GetName()).String(), ResourceVersion: obj.GetResourceVersion()})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			i := 0
			for b.Loop() {
				i++
				if err := unstructured.SetNestedField(obj.Object, strconv.Itoa(i), append(k.data, dataKey)...); err != nil {
					b.Fatal(err)
				}
				if obj, err = c.Namespace("default").Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
					b.Fatal(err)
				}
				waitEvent(b, w, obj.GetResourceVersion())
			}
		}},
	}
	for _, op := range ops {
		for _, k := range kinds {
			b.Run(op.name+"/kind="+k.name, func(b *testing.B) {
				runs++
				op.run(b, dyn.Resource(k.gvr), k, "bench-"+strconv.Itoa(runs))
			})
		}
	}
}
