package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"

	"kplane.dev/libs/apiserver/apitest"
)

// scaleClient is client-go's scale client as kubectl scale and the
// horizontal pod autoscaler build it: the scale's kind comes from
// discovery, aggregated or legacy.
func scaleClient(t *testing.T, cfg *restclient.Config, legacy bool) scale.ScalesGetter {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var di discovery.DiscoveryInterface = dc
	if legacy {
		di = dc.WithLegacy()
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(di))
	c, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(di))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestScaleClient(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(apitest.Widgets).Namespace("ns")
	created, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"},
		"spec":     map[string]any{"size": int64(1), "replicas": int64(2)},
	}}, metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	created.Object["status"] = map[string]any{"replicas": int64(1), "selector": "app=w"}
	withStatus, err := widgets.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	gr := apitest.Widgets.GroupResource()

	for _, legacy := range []bool{false, true} {
		scales := scaleClient(t, srv.Config, legacy).Scales("ns")
		s, err := scales.Get(ctx, gr, "w", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get scale (legacy discovery %v): %v", legacy, err)
		}
		if s.Name != "w" || s.Namespace != "ns" || s.UID != withStatus.GetUID() || s.ResourceVersion != withStatus.GetResourceVersion() ||
			!s.CreationTimestamp.Equal(&metav1.Time{Time: withStatus.GetCreationTimestamp().Time}) ||
			s.Spec.Replicas != 2 || s.Status.Replicas != 1 || s.Status.Selector != "app=w" {
			t.Fatalf("scale %+v does not match widget %v", s, withStatus.Object)
		}
	}
	scales := scaleClient(t, srv.Config, false).Scales("ns")
	if _, err := scales.Get(ctx, gr, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) || err.Error() != `widgets.example.com "nope" not found` {
		t.Fatalf("get scale of a missing widget: %v", err)
	}

	stale, err := scales.Get(ctx, gr, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := stale.DeepCopy()
	want.Spec.Replicas = 5
	updated, err := scales.Update(ctx, gr, want, metav1.UpdateOptions{FieldManager: "scaler"})
	if err != nil {
		t.Fatalf("update scale: %v", err)
	}
	if updated.Spec.Replicas != 5 || updated.Status.Replicas != 1 || updated.ResourceVersion == stale.ResourceVersion {
		t.Fatalf("updated scale %+v", updated)
	}
	stale.Spec.Replicas = 6
	if _, err := scales.Update(ctx, gr, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: err = %v, want Conflict", err)
	}
	w, err := widgets.Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
	size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
	if replicas != 5 || size != 1 || w.GetGeneration() != 2 || w.GetResourceVersion() != updated.ResourceVersion {
		t.Fatalf("widget after scaling to 5: %v", w.Object)
	}
	// The scaler owns the replicas through /scale, and the creator no
	// longer does, as kube moves ownership between the two.
	owners := map[string]string{}
	for _, e := range w.GetManagedFields() {
		if strings.Contains(string(e.FieldsV1.Raw), `"f:replicas"`) && strings.Contains(string(e.FieldsV1.Raw), `"f:spec"`) {
			owners[e.Manager] = e.Subresource + " " + e.APIVersion
		}
	}
	if len(owners) != 1 || owners["scaler"] != "scale example.com/v1" {
		t.Fatalf("owners of spec.replicas: %v; managedFields %v", owners, w.GetManagedFields())
	}

	gvr := apitest.Widgets
	patches := []struct {
		pt   types.PatchType
		body string
		want int32
	}{
		{types.MergePatchType, `{"spec":{"replicas":7}}`, 7},
		{types.JSONPatchType, `[{"op":"replace","path":"/spec/replicas","value":3}]`, 3},
		{types.ApplyPatchType, `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"w"},"spec":{"replicas":4}}`, 4},
	}
	for _, p := range patches {
		opts := metav1.PatchOptions{}
		if p.pt == types.ApplyPatchType {
			force := true
			opts.FieldManager, opts.Force = "applier", &force
		}
		got, err := scales.Patch(ctx, gvr, "w", p.pt, []byte(p.body), opts)
		if err != nil {
			t.Fatalf("%s patch of the scale: %v", p.pt, err)
		}
		if got.Spec.Replicas != p.want {
			t.Fatalf("%s patch: replicas %d, want %d", p.pt, got.Spec.Replicas, p.want)
		}
	}
	if _, err := scales.Patch(ctx, gvr, "w", types.StrategicMergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Fatalf("strategic merge patch of a custom resource's scale: err = %v, want UnsupportedMediaType", err)
	}
	if _, err := scales.Patch(ctx, gvr, "w", types.MergePatchType, []byte(`{"spec":{"replicas":-1}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) ||
		err.Error() != `Widget.example.com "w" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer` {
		t.Fatalf("negative replicas: %v", err)
	}
	s, err := scales.Get(ctx, gr, "w", metav1.GetOptions{})
	if err != nil || s.Spec.Replicas != 4 {
		t.Fatalf("scale after the patches: %+v, %v", s, err)
	}
}

func TestScaleDiscovery(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	dc, err := discovery.NewDiscoveryClientForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := metav1.APIResource{Name: "widgets/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get", "patch", "update"}}
	for name, di := range map[string]discovery.DiscoveryInterface{"aggregated": dc, "legacy": dc.WithLegacy()} {
		list, err := di.ServerResourcesForGroupVersion(apitest.Widgets.GroupVersion().String())
		if err != nil {
			t.Fatalf("%s discovery: %v", name, err)
		}
		var got []metav1.APIResource
		for _, r := range list.APIResources {
			if strings.HasPrefix(r.Name, "widgets/") {
				got = append(got, r)
			}
		}
		if len(got) != 2 || got[0].Name != "widgets/status" || !equalResource(got[1], want) {
			t.Fatalf("%s discovery lists %+v, want widgets/status then %+v", name, got, want)
		}
		kind, err := scale.NewDiscoveryScaleKindResolver(di).ScaleForResource(apitest.Widgets)
		if err != nil || kind != (schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}) {
			t.Fatalf("%s discovery: scale kind %v, %v", name, kind, err)
		}
	}
}

// equalResource compares what discovery says of a subresource; aggregated
// discovery leaves out what legacy has no field for, and so do we.
func equalResource(a, b metav1.APIResource) bool {
	return a.Name == b.Name && a.Namespaced == b.Namespaced && a.Group == b.Group && a.Version == b.Version && a.Kind == b.Kind &&
		strings.Join(a.Verbs, ",") == strings.Join(b.Verbs, ",")
}
