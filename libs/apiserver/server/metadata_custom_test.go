package server_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/storage"
)

// customMetadata is the in-process metadata client of a second server on
// f's etcd and prefix that stores configmaps only, as core does beside
// crd, reading custom resources from etcd; its HTTP client is f's, whose
// requests it records.
func customMetadata(t *testing.T, f *fixture, opts ...server.MetadataOption) (metadata.Interface, *recorder) {
	t.Helper()
	var cms []*resource.Resource
	for _, r := range f.res {
		if r.GroupVersionResource == configMapsGVR {
			cms = append(cms, r)
		}
	}
	sopts := &server.Options{Resources: cms, Stores: server.EtcdStores(f.etcd, f.prefix, nil)}
	cfg, err := sopts.Config()
	if err != nil {
		t.Fatal(err)
	}
	core, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	rcfg := restclient.CopyConfig(f.config)
	rcfg.Wrap(rec.wrap)
	remote, err := metadata.NewForConfig(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	return core.Metadata(remote, append([]server.MetadataOption{server.CustomResourcesIn(f.etcd, f.prefix)}, opts...)...), rec
}

// putWidgetsDefinition stores the CustomResourceDefinition of widgets as
// crd would, serving v1 in the given scope.
func putWidgetsDefinition(t *testing.T, f *fixture, scope apiextensionsv1.ResourceScope) {
	t.Helper()
	crd := apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: "uid-widgets"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetsGVR.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true},
				{Name: "v2", Served: false},
			},
		},
	}
	data, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	key := storage.NewKeys(f.prefix, apiextensionsv1.GroupName, "customresourcedefinitions").Object("", crd.Name)
	if _, err := f.etcd.Put(f.ctx, key, string(data)); err != nil {
		t.Fatal(err)
	}
}

// TestMetadataOfCustomResourcesFromEtcd shows a server that does not
// store a custom resource listing and watching its metadata from etcd
// while its definition serves it, answering what the API answers without
// a request, and leaving to the API what the definition does not serve.
func TestMetadataOfCustomResourcesFromEtcd(t *testing.T) {
	f := newFixture(t, cached)
	f.seedWidget("ns1", "a", 1)
	b := f.seedWidget("ns1", "b", 2)
	b.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Widget", Name: "a", UID: "uid-a"}})
	b.SetFinalizers([]string{"example.com/hold"})
	b.SetLabels(map[string]string{"app": "x"})
	if _, err := f.dynamic().Resource(widgetsGVR).Namespace("ns1").Update(f.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.seedWidget("ns2", "c", 3)
	api := f.metadata()

	t.Run("without a definition the API answers", func(t *testing.T) {
		local, rec := customMetadata(t, f)
		if _, err := local.Resource(widgetsGVR).List(f.ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if sent := rec.sent(); len(sent) != 1 {
			t.Errorf("list without a definition sent %v, want one request to the API", sent)
		}
	})

	putWidgetsDefinition(t, f, apiextensionsv1.NamespaceScoped)
	local, rec := customMetadata(t, f)
	for _, c := range []struct {
		name string
		ns   string
		opts metav1.ListOptions
	}{
		{name: "all namespaces"},
		{name: "one namespace", ns: "ns1"},
		{name: "label selector", opts: metav1.ListOptions{LabelSelector: "app=x"}},
		{name: "page", opts: metav1.ListOptions{Limit: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			compareLists(t, f, api, local, widgetsGVR, c.ns, c.opts)
		})
	}
	if sent := rec.sent(); len(sent) != 0 {
		t.Errorf("lists from etcd sent %v", sent)
	}

	t.Run("informer", func(t *testing.T) {
		inf := syncedInformer(t, f, local, widgetsGVR, "ns2/c")
		d := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "d"}}}
		if _, err := f.dynamic().Resource(widgetsGVR).Namespace("ns2").Create(f.ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the informer to see ns2/d", func() bool {
			_, ok, _ := inf.GetStore().GetByKey("ns2/d")
			return ok
		})
		if err := f.dynamic().Resource(widgetsGVR).Namespace("ns2").Delete(f.ctx, "c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the informer to forget ns2/c", func() bool {
			_, ok, _ := inf.GetStore().GetByKey("ns2/c")
			return !ok
		})
		if sent := rec.sent(); len(sent) != 0 {
			t.Errorf("the informer sent %v", sent)
		}
	})

	t.Run("watch", func(t *testing.T) {
		list, err := local.Resource(widgetsGVR).Namespace("ns1").List(f.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := local.Resource(widgetsGVR).Namespace("ns1").Watch(f.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		f.seedWidget("ns2", "other", 4)
		if err := f.dynamic().Resource(widgetsGVR).Namespace("ns1").Delete(f.ctx, "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := next(t, w)
		p, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if ev.Type != watch.Modified || !ok || p.Name != "b" || p.DeletionTimestamp == nil {
			t.Fatalf("event = %s %#v, want b MODIFIED with a deletionTimestamp (it has a finalizer)", ev.Type, ev.Object)
		}
		if sent := rec.sent(); len(sent) != 0 {
			t.Errorf("the watch sent %v", sent)
		}
	})

	t.Run("what the definition does not serve goes to the API", func(t *testing.T) {
		for _, c := range []struct {
			name string
			gvr  schema.GroupVersionResource
			opts metav1.ListOptions
		}{
			{name: "a version not served", gvr: widgetsGVR.GroupResource().WithVersion("v2")},
			{name: "another resource", gvr: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}},
			{name: "a field selector", gvr: widgetsGVR, opts: metav1.ListOptions{FieldSelector: "metadata.name=a"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				before := len(rec.sent())
				_, err := local.Resource(c.gvr).List(f.ctx, c.opts)
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				if sent := rec.sent(); len(sent) != before+1 {
					t.Errorf("list sent %v, want one request to the API", sent[before:])
				}
			})
		}
	})
}

// TestOwnershipOnlyMetadataOfCustomResources shows OwnershipOnly's
// lists from etcd holding what the API lists less the metadata that
// ownership does not need, and a label selector left to the API.
func TestOwnershipOnlyMetadataOfCustomResources(t *testing.T) {
	f := newFixture(t, cached)
	a := f.seedWidget("ns1", "a", 1)
	b := f.seedWidget("ns1", "b", 2)
	b.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Widget", Name: "a", UID: a.GetUID(), BlockOwnerDeletion: ptr.To(true)}})
	b.SetFinalizers([]string{"example.com/hold"})
	b.SetLabels(map[string]string{"app": "x"})
	b.SetAnnotations(map[string]string{"note": "y"})
	if _, err := f.dynamic().Resource(widgetsGVR).Namespace("ns1").Update(f.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.dynamic().Resource(widgetsGVR).Namespace("ns1").Delete(f.ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	putWidgetsDefinition(t, f, apiextensionsv1.NamespaceScoped)
	local, rec := customMetadata(t, f, server.OwnershipOnly())

	want, err := f.metadata().Resource(widgetsGVR).Namespace("ns1").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Items {
		m := &want.Items[i].ObjectMeta
		*m = metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			DeletionTimestamp: m.DeletionTimestamp, OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers,
		}
	}
	got, err := local.Resource(widgetsGVR).Namespace("ns1").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sent := rec.sent(); len(sent) != 0 {
		t.Errorf("list from etcd sent %v", sent)
	}
	if len(want.Items) != 2 || want.Items[1].DeletionTimestamp == nil || len(want.Items[1].OwnerReferences) != 1 {
		t.Fatalf("the API listed %+v, want a and b, b being deleted with an owner", want.Items)
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreTypes(metav1.TypeMeta{})); diff != "" {
		t.Errorf("ownership-only list differs from the API's, trimmed (-API +in-process):\n%s", diff)
	}

	if _, err := local.Resource(widgetsGVR).List(f.ctx, metav1.ListOptions{LabelSelector: "app=x"}); err != nil {
		t.Fatal(err)
	}
	if sent := rec.sent(); len(sent) != 1 {
		t.Errorf("list by label selector sent %v, want one request to the API", sent)
	}
}

// TestMetadataOfClusterScopedCustomResources shows a namespace asked of
// a cluster-scoped custom resource left to the API, which answers it.
func TestMetadataOfClusterScopedCustomResources(t *testing.T) {
	f := newFixture(t, direct)
	putWidgetsDefinition(t, f, apiextensionsv1.ClusterScoped)
	local, rec := customMetadata(t, f)
	if _, err := local.Resource(widgetsGVR).List(f.ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if sent := rec.sent(); len(sent) != 0 {
		t.Fatalf("list of every widget sent %v", sent)
	}
	_, _ = local.Resource(widgetsGVR).Namespace("ns1").List(f.ctx, metav1.ListOptions{})
	if sent := rec.sent(); len(sent) != 1 {
		t.Errorf("list in a namespace sent %v, want one request to the API", sent)
	}
}
