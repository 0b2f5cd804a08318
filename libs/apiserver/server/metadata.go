package server

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/storage"
)

// Metadata returns a client-go metadata client whose lists and watches of
// the resources s stores are read in process, from their stores, and
// whose every other request (gets, patches, deletes, and any request for
// a resource s does not store) goes to remote.
//
// It is for the service's own controllers: kube-controller-manager's
// garbage collector watches the metadata of every resource, and through
// the API that costs each change an encoding, a decoding and, behind a
// gateway, two more hops; read here it costs a copy of the metadata.
// The reads are the controller's, not a user's: no authorization or
// admission applies, as none applies to what a watch cache reads. The
// objects it returns are the caller's own.
func (s *Server) Metadata(remote metadata.Interface, opts ...MetadataOption) metadata.Interface {
	m := &localMetadata{s: s, remote: remote}
	for _, opt := range opts {
		opt(m)
	}
	if m.custom != nil {
		m.custom.build(m.ownership)
	}
	return m
}

type localMetadata struct {
	s      *Server
	remote metadata.Interface
	// custom, when set, finds custom resources in etcd.
	custom *customResources
	// ownership is set by OwnershipOnly.
	ownership bool
}

func (m *localMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	remote := m.remote.Resource(gvr)
	return &localGetter{localResource: localResource{ResourceInterface: remote, s: m.s, custom: m.custom, gvr: gvr}, remote: remote}
}

// localGetter is a resource across namespaces, and the way to one.
type localGetter struct {
	localResource
	remote metadata.Getter
}

func (g *localGetter) Namespace(ns string) metadata.ResourceInterface {
	return &localResource{ResourceInterface: g.remote.Namespace(ns), s: g.s, custom: g.custom, gvr: g.gvr, namespace: ns}
}

// localResource lists and watches from the store of gvr when s stores it,
// or from etcd when it is a custom resource and custom is set; its
// embedded remote client does the rest.
type localResource struct {
	metadata.ResourceInterface
	s         *Server
	custom    *customResources
	gvr       schema.GroupVersionResource
	namespace string
}

// source is what a local list or watch reads: a store, the prefix of the
// collection in it, and the fields its objects' selectors match.
type source struct {
	store  storage.Interface
	prefix string
	attrs  storage.AttrFunc
}

// source returns where the list or watch opts describe is read, or false
// when it is remote's.
func (r *localResource) source(ctx context.Context, opts metav1.ListOptions) (source, bool) {
	if b, prefix := r.local(); b != nil {
		return source{store: b.store, prefix: prefix, attrs: b.r.AttrFunc()}, true
	}
	if r.custom == nil || opts.FieldSelector != "" || (r.custom.ownership && opts.LabelSelector != "") {
		return source{}, false
	}
	// An error reading the definition leaves the request to the API,
	// which answers it as a client would be answered.
	prefix, err := r.custom.find(ctx, r.gvr, r.namespace)
	if err != nil {
		return source{}, false
	}
	return source{store: r.custom.store, prefix: prefix, attrs: storage.DefaultAttrs}, true
}

// local returns the backend of the resource and the prefix its
// collection reads, or nil when the request is remote's: a resource not
// stored here, or a namespace asked of a cluster-scoped one, which the
// API answers with its own error.
func (r *localResource) local() (*backend, string) {
	b := (*r.s.table.Load())[r.gvr]
	if b == nil || b.store == nil {
		return nil, ""
	}
	if !b.r.Namespaced {
		if r.namespace != "" {
			return nil, ""
		}
		return b, b.keys.Prefix()
	}
	if r.namespace == "" {
		return b, b.keys.Prefix()
	}
	return b, b.keys.NamespacePrefix(r.namespace)
}

func (r *localResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	src, ok := r.source(ctx, opts)
	if !ok {
		return r.ResourceInterface.List(ctx, opts)
	}
	o, err := listOptions(opts, false)
	if err != nil {
		return nil, err
	}
	res, err := src.store.List(ctx, src.prefix, storage.ListOptions{
		ResourceVersion:      o.ResourceVersion,
		ResourceVersionMatch: o.ResourceVersionMatch,
		Limit:                o.Limit,
		Continue:             o.Continue,
		Predicate:            storage.SelectionPredicate{Label: o.LabelSelector, Field: o.FieldSelector, GetAttrs: src.attrs},
		// Each item is copied into the list, never changed.
		Shared: true,
	})
	if err != nil {
		return nil, apistatus.FromStorage(err, r.gvr.GroupResource(), "")
	}
	list := &metav1.PartialObjectMetadataList{
		ListMeta: metav1.ListMeta{
			ResourceVersion:    strconv.FormatInt(res.ResourceVersion, 10),
			Continue:           res.Continue,
			RemainingItemCount: res.RemainingItemCount,
		},
		Items: make([]metav1.PartialObjectMetadata, len(res.Items)),
	}
	for i, obj := range res.Items {
		p, err := partialCopy(obj)
		if err != nil {
			return nil, err
		}
		list.Items[i] = *p
	}
	return list, nil
}

func (r *localResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	src, ok := r.source(ctx, opts)
	if !ok {
		return r.ResourceInterface.Watch(ctx, opts)
	}
	o, err := listOptions(opts, true)
	if err != nil {
		return nil, err
	}
	// As over HTTP: the watch ends with its timeout, with ctx, and when
	// the server shuts down.
	var cancel context.CancelFunc
	if o.TimeoutSeconds != nil && *o.TimeoutSeconds > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*o.TimeoutSeconds)*time.Second)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	unlink := context.AfterFunc(r.s.watchCtx, cancel)
	stop := func() {
		unlink()
		cancel()
	}
	in, err := src.store.Watch(ctx, src.prefix, storage.WatchOptions{
		ResourceVersion:      o.ResourceVersion,
		ResourceVersionMatch: o.ResourceVersionMatch,
		Predicate:            storage.SelectionPredicate{Label: o.LabelSelector, Field: o.FieldSelector, GetAttrs: src.attrs},
		AllowBookmarks:       o.AllowWatchBookmarks,
		SendInitialEvents:    o.SendInitialEvents,
		// Each event's object is copied, never changed.
		Shared: true,
	})
	if err != nil {
		stop()
		return nil, apistatus.FromStorage(err, r.gvr.GroupResource(), "")
	}
	w := &metadataWatch{in: in, ctx: ctx, stop: stop, out: make(chan watch.Event)}
	go w.run()
	return w, nil
}

// listOptions reads a client's options as the HTTP handler reads its
// query: defaulted for watch-lists and validated, 422 when they
// contradict each other.
func listOptions(opts metav1.ListOptions, watching bool) (*metainternalversion.ListOptions, error) {
	o := &metainternalversion.ListOptions{}
	if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&opts, o, nil); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	o.Watch = watching
	metainternalversion.SetListOptionsDefaults(o, true)
	if errs := metainternalversionvalidation.ValidateListOptions(o, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	return o, nil
}

// partialCopy is obj's metadata as a PartialObjectMetadata of its own:
// obj is the store's, shared with every reader. Its type is left empty:
// what client-go's metadata client decodes has one or none depending on
// the encoding the API chose, and nothing reads it.
func partialCopy(obj runtime.Object) (*metav1.PartialObjectMetadata, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("read metadata of %T: %w", obj, err)
	}
	return meta.AsPartialObjectMetadata(m).DeepCopy(), nil
}

// metadataWatch turns a store's watch into one of PartialObjectMetadata.
// Its goroutine ends when the store's watch ends or the watch is
// stopped, whichever is first, and closes out.
type metadataWatch struct {
	in   watch.Interface
	ctx  context.Context
	stop func()
	out  chan watch.Event
}

func (w *metadataWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *metadataWatch) Stop() { w.stop() }

func (w *metadataWatch) run() {
	defer close(w.out)
	defer w.in.Stop()
	defer w.stop()
	for {
		var ev watch.Event
		select {
		case <-w.ctx.Done():
			return
		case e, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			ev = e
		}
		if ev.Type != watch.Error {
			p, err := partialCopy(ev.Object)
			if err != nil {
				ev = watch.Event{Type: watch.Error, Object: &apierrors.NewInternalError(err).ErrStatus}
			} else {
				ev.Object = p
			}
		}
		select {
		case <-w.ctx.Done():
			return
		case w.out <- ev:
		}
	}
}
