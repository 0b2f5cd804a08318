package server_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// recorder counts the requests a client sends, by path.
type recorder struct {
	mu    sync.Mutex
	paths []string
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (r *recorder) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// localMetadata is the server's in-process metadata client over an HTTP
// one of the same server, whose requests it records.
func localMetadata(t *testing.T, f *fixture) (metadata.Interface, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := restclient.CopyConfig(f.config)
	cfg.Wrap(rec.wrap)
	remote, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f.srv.Metadata(remote), rec
}

// TestMetadataListMatchesAPI shows the in-process lists answering what
// the API answers a metadata client over HTTP, object for object, without
// a request; for both kinds of store and for typed and unstructured
// resources.
func TestMetadataListMatchesAPI(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, kind)
			owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "uid-ns1-a", Controller: ptr.To(true)}
			f.seedConfigMap("ns1", "a", map[string]string{"app": "x"}, map[string]string{"k": "v"})
			b := f.seedConfigMap("ns1", "b", map[string]string{"app": "y"}, nil)
			b.OwnerReferences, b.Finalizers, b.Annotations = []metav1.OwnerReference{owner}, []string{"example.com/hold"}, map[string]string{"note": "kept"}
			if _, err := f.typed().CoreV1().ConfigMaps("ns1").Update(f.ctx, b, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.seedConfigMap("ns2", "c", map[string]string{"app": "x"}, nil)
			f.seedWidget("ns1", "w", 3)
			local, rec := localMetadata(t, f)
			api := f.metadata()

			for _, c := range []struct {
				name string
				gvr  schema.GroupVersionResource
				ns   string
				opts metav1.ListOptions
			}{
				{name: "all namespaces", gvr: configMapsGVR},
				{name: "one namespace", gvr: configMapsGVR, ns: "ns1"},
				{name: "label selector", gvr: configMapsGVR, opts: metav1.ListOptions{LabelSelector: "app=x"}},
				{name: "field selector", gvr: configMapsGVR, opts: metav1.ListOptions{FieldSelector: "metadata.name=b"}},
				{name: "page", gvr: configMapsGVR, opts: metav1.ListOptions{Limit: 2}},
				{name: "unstructured", gvr: widgetsGVR, ns: "ns1"},
			} {
				t.Run(c.name, func(t *testing.T) {
					compareLists(t, f, api, local, c.gvr, c.ns, c.opts)
				})
			}
			if sent := rec.sent(); len(sent) != 0 {
				t.Errorf("in-process lists sent %v", sent)
			}
		})
	}
}

// compareLists lists gvr in ns (every namespace when empty) with opts
// from the API and from local, and reports where they differ.
func compareLists(t *testing.T, f *fixture, api, local metadata.Interface, gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) {
	t.Helper()
	want, err := api.Resource(gvr).Namespace(ns).List(f.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := local.Resource(gvr).Namespace(ns).List(f.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Items) == 0 {
		t.Fatal("the API listed nothing: the comparison would show nothing")
	}
	if opts.Limit > 0 {
		// A continue token names the read's revision.
		want.Continue, got.Continue = "", ""
	}
	// The API's items carry a type in JSON and none in protobuf; nothing
	// reads it.
	if diff := cmp.Diff(want, got, cmpopts.IgnoreTypes(metav1.TypeMeta{})); diff != "" {
		t.Errorf("in-process list differs from the API's (-API +in-process):\n%s", diff)
	}
}

// syncedInformer runs client-go's metadata informer of gvr on client
// until f's context ends, and returns it once it has listed, with the
// object of key among what it listed.
func syncedInformer(t *testing.T, f *fixture, client metadata.Interface, gvr schema.GroupVersionResource, key string) cache.SharedIndexInformer {
	t.Helper()
	inf := metadatainformer.NewFilteredMetadataInformer(client, gvr, "", 0, cache.Indexers{}, nil).Informer()
	go inf.RunWithContext(f.ctx)
	if !cache.WaitForCacheSync(f.ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, ok, _ := inf.GetStore().GetByKey(key); !ok {
		t.Fatalf("informer has not listed %s", key)
	}
	return inf
}

// TestMetadataWatch shows an in-process watch streaming changes,
// watch-list's initial events and its closing bookmark, and ending when
// stopped.
func TestMetadataWatch(t *testing.T) {
	f := newFixture(t, cached)
	a := f.seedConfigMap("ns1", "a", nil, nil)
	f.seedConfigMap("ns2", "b", nil, nil)
	local, rec := localMetadata(t, f)
	cms := local.Resource(configMapsGVR).Namespace("ns1")
	s, _ := f.store(configMapsGVR)

	t.Run("changes", func(t *testing.T) {
		w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		created := f.seedConfigMap("ns1", "c", map[string]string{"app": "x"}, nil)
		f.seedConfigMap("ns2", "d", nil, nil)
		if err := f.typed().CoreV1().ConfigMaps("ns1").Delete(f.ctx, "c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []watch.EventType{watch.Added, watch.Deleted} {
			ev := next(t, w)
			p, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if ev.Type != want || !ok {
				t.Fatalf("event = %s %T, want %s of a PartialObjectMetadata", ev.Type, ev.Object, want)
			}
			if p.Name != "c" || p.UID != created.UID || p.Labels["app"] != "x" {
				t.Errorf("%s event carries %#v", ev.Type, p)
			}
		}
	})

	t.Run("watch-list", func(t *testing.T) {
		w, err := cms.Watch(f.ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev := next(t, w)
		if p, ok := ev.Object.(*metav1.PartialObjectMetadata); ev.Type != watch.Added || !ok || p.Name != "a" {
			t.Fatalf("first event = %s %#v, want ADDED a", ev.Type, ev.Object)
		}
		for {
			ev = next(t, w)
			if ev.Type != watch.Bookmark {
				continue
			}
			p, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				t.Fatalf("bookmark of %T, want PartialObjectMetadata", ev.Object)
			}
			if p.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				break
			}
		}
	})

	t.Run("invalid options", func(t *testing.T) {
		_, err := cms.Watch(f.ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true)})
		if !apierrors.IsInvalid(err) {
			t.Errorf("sendInitialEvents without resourceVersionMatch: %v, want 422 Invalid", err)
		}
	})

	t.Run("stop ends the store's watch", func(t *testing.T) {
		eventually(t, "earlier watches to stop", func() bool { return s.open.Load() == 0 })
		w, err := cms.Watch(f.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.open.Load() != 1 {
			t.Fatalf("%d store watches open, want 1", s.open.Load())
		}
		w.Stop()
		eventually(t, "the store watch to stop", func() bool { return s.open.Load() == 0 })
		eventually(t, "the result channel to close", func() bool {
			select {
			case _, ok := <-w.ResultChan():
				return !ok
			default:
				return false
			}
		})
	})

	if sent := rec.sent(); len(sent) != 0 {
		t.Errorf("in-process watches sent %v", sent)
	}
}

// TestMetadataWatchExpired shows a watch from a compacted revision
// ending in 410, which makes an informer relist.
func TestMetadataWatchExpired(t *testing.T) {
	f := newFixture(t, direct)
	a := f.seedConfigMap("ns1", "a", nil, nil)
	last := f.seedConfigMap("ns1", "b", nil, nil)
	local, _ := localMetadata(t, f)
	rev, _ := strconv.ParseInt(last.ResourceVersion, 10, 64)
	if _, err := f.etcd.Compact(f.ctx, rev); err != nil {
		t.Fatal(err)
	}
	old, _ := strconv.ParseInt(a.ResourceVersion, 10, 64)
	w, err := local.Resource(configMapsGVR).Namespace("ns1").Watch(f.ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(old-1, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := next(t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok || !apierrors.IsResourceExpired(apierrors.FromObject(st)) {
		t.Fatalf("event = %s %#v, want ERROR with a 410 Expired Status", ev.Type, ev.Object)
	}
}

// TestMetadataInformer runs client-go's metadata informer, watch-list
// and all, on the in-process client: it fills, follows a change, and
// sends no request; a resource the server does not store goes to the
// API.
func TestMetadataInformer(t *testing.T) {
	f := newFixture(t, cached)
	f.seedConfigMap("ns1", "a", nil, nil)
	local, rec := localMetadata(t, f)

	inf := syncedInformer(t, f, local, configMapsGVR, "ns1/a")
	if _, err := f.typed().CoreV1().ConfigMaps("ns2").Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer to see ns2/b", func() bool {
		_, ok, _ := inf.GetStore().GetByKey("ns2/b")
		return ok
	})
	if sent := rec.sent(); len(sent) != 0 {
		t.Errorf("the informer sent %v", sent)
	}

	missing := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	if _, err := local.Resource(missing).List(f.ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("list of a resource not served: %v, want the API's 404", err)
	}
	if sent := rec.sent(); len(sent) != 1 || sent[0] != "/apis/example.com/v1/gadgets" {
		t.Errorf("list of a resource not served sent %v, want one request to the API", sent)
	}
}
