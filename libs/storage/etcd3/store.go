package etcd3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/storagemetrics"
)

// Store keeps one resource's objects in etcd.
type Store struct {
	client    *clientv3.Client
	codec     storage.Codec
	newObj    func() runtime.Object
	opts      options
	handoff   handoff
	revisions revisionReads
}

var _ storage.Interface = (*Store)(nil)

type options struct {
	logger   *slog.Logger
	maxBatch int64
	metrics  *storagemetrics.Resource
}

// Option configures a Store.
type Option func(*options)

// WithLogger makes the store log what it cannot return to a caller, such
// as a watch event that does not decode. Without it the store logs nothing.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMetrics records every etcd request and watch event of the store in
// m, the metrics of the store's resource.
func WithMetrics(m *storagemetrics.Resource) Option { return func(o *options) { o.metrics = m } }

// WithMaxListBatch caps how many keys a limited list with a selector reads
// from etcd per round trip while it fills a page (default 10000). The
// first round trip reads limit keys; each further one doubles up to the cap.
func WithMaxListBatch(n int64) Option { return func(o *options) { o.maxBatch = n } }

// New returns a store of one resource's objects. newObj returns an empty
// object of the kind (used for bookmarks).
func New(client *clientv3.Client, codec storage.Codec, newObj func() runtime.Object, opts ...Option) *Store {
	o := options{logger: slog.New(slog.DiscardHandler), maxBatch: 10000}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{client: client, codec: codec, newObj: newObj, opts: o}
	s.revisions.read = s.readRevision
	return s
}

// CurrentRevision is a linearizable read of etcd's current revision,
// shared with the callers that ask at the same time.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	return s.revisions.get(ctx)
}

// readRevision reads etcd's current revision.
func (s *Store) readRevision(ctx context.Context) (int64, error) {
	// Any key does: the header carries the store's revision.
	start := time.Now()
	resp, err := s.client.Get(ctx, "/", clientv3.WithCountOnly())
	s.opts.metrics.Request(storagemetrics.OpCurrentRevision, start, err)
	if err != nil {
		return 0, fmt.Errorf("read current revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// Retains implements cacher.ProgressRequester.
func (s *Store) Retains(ctx context.Context, rev int64) (bool, error) {
	start := time.Now()
	_, err := s.client.Get(ctx, "/", clientv3.WithCountOnly(), clientv3.WithRev(rev))
	s.opts.metrics.Request(storagemetrics.OpRetains, start, err)
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read revision %d: %w", rev, err)
	}
	return true, nil
}

// RequestWatchProgress asks etcd for a progress notification on this
// store's watch streams; watches opened with AllowBookmarks then emit a
// BOOKMARK carrying the revision etcd has reached. etcd answers only once
// every watch on the stream has caught up, and a stream is per set of gRPC
// metadata, so ctx and the watches' contexts must carry the same (usually
// none).
func (s *Store) RequestWatchProgress(ctx context.Context) error {
	// Watches run on the stream of a require-leader context; the request
	// must name the same stream to reach them.
	if err := s.client.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
		return fmt.Errorf("request watch progress: %w", err)
	}
	return nil
}

// Create implements storage.Interface.
func (s *Store) Create(ctx context.Context, key string, obj runtime.Object) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("read metadata of new object: %w", err)
	}
	if m.GetResourceVersion() != "" {
		return nil, storage.NewError(storage.ErrCodeInvalidObj, key, 0, "resourceVersion should not be set on objects to be created")
	}
	data, err := s.encode(obj)
	if err != nil {
		return nil, err
	}
	out, err := s.decodeWrite(key, data)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	s.opts.metrics.Request(storagemetrics.OpCreate, start, err)
	if err != nil {
		return nil, fmt.Errorf("create %q: %w", key, err)
	}
	if !resp.Succeeded {
		return nil, storage.NewError(storage.ErrCodeKeyExists, key, 0, "")
	}
	return out, setRV(out, resp.Header.Revision)
}

// decodeWrite decodes data, about to be written at key, and offers it to
// the watch (see handoff) before the write can reach it.
func (s *Store) decodeWrite(key string, data []byte) (runtime.Object, error) {
	obj, err := s.decode(data, 0)
	if err != nil {
		return nil, err
	}
	s.handoff.put(key, data, 0, obj)
	return obj, nil
}

// Get implements storage.Interface.
func (s *Store) Get(ctx context.Context, key string, opts storage.GetOptions) (runtime.Object, error) {
	minRV, err := parseRV(opts.ResourceVersion, key)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := s.client.Get(ctx, key)
	s.opts.metrics.Request(storagemetrics.OpGet, start, err)
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	if resp.Header.Revision < minRV {
		return nil, tooLarge(key, resp.Header.Revision)
	}
	if len(resp.Kvs) == 0 {
		return nil, storage.NewError(storage.ErrCodeKeyNotFound, key, 0, "")
	}
	return s.decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// GuaranteedUpdate implements storage.Interface.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error) {
	return s.GuaranteedUpdateFrom(ctx, key, preconditions, tryUpdate, nil)
}

// GuaranteedUpdateFrom is GuaranteedUpdate starting from suggested, the
// state a watch cache holds for key, instead of reading etcd first, as
// kube-apiserver's store takes its cache's object: the write's compare
// finds out whether the state was current. A state that fails the
// preconditions or tryUpdate is read afresh and tried again before the
// failure counts. suggested is not changed; nil reads etcd.
func (s *Store) GuaranteedUpdateFrom(ctx context.Context, key string, preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, suggested runtime.Object) (runtime.Object, error) {
	st, err := s.startState(ctx, key, suggested)
	if err != nil {
		return nil, err
	}
	for {
		updated, err := s.tryUpdate(key, st, preconditions, tryUpdate)
		if err != nil {
			if st.current {
				return nil, err
			}
			if st, err = s.readState(ctx, key); err != nil {
				return nil, err
			}
			continue
		}
		data, err := s.encode(updated)
		if err != nil {
			return nil, err
		}
		if st.data == nil {
			// A cached state: the bytes it would be stored as.
			if st.data, err = s.encode(st.obj); err != nil {
				return nil, err
			}
		}
		if bytes.Equal(data, st.data) {
			if st.current {
				return st.obj, nil
			}
			// Nothing to write, if the cached state is the latest: only
			// etcd can say.
			if st, err = s.readState(ctx, key); err != nil {
				return nil, err
			}
			continue
		}
		out, err := s.decodeWrite(key, data)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", st.rev)).
			Then(clientv3.OpPut(key, string(data))).
			Else(clientv3.OpGet(key)).
			Commit()
		s.opts.metrics.Request(storagemetrics.OpUpdate, start, err)
		if err != nil {
			return nil, fmt.Errorf("update %q: %w", key, err)
		}
		if resp.Succeeded {
			return out, setRV(out, resp.Header.Revision)
		}
		// Someone wrote in between: start over from what they wrote.
		if st, err = s.elseState(key, resp); err != nil {
			return nil, err
		}
	}
}

func (s *Store) tryUpdate(key string, st state, preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error) {
	if err := checkPreconditions(key, preconditions, st.obj); err != nil {
		return nil, err
	}
	// A state read from etcd is this write's alone, as in kube's store;
	// the cache's object is compared with after tryUpdate ran.
	return tryUpdate(st.own())
}

// Delete implements storage.Interface.
func (s *Store) Delete(ctx context.Context, key string, preconditions *storage.Preconditions, validate storage.ValidateDeletionFunc) (runtime.Object, error) {
	return s.DeleteFrom(ctx, key, preconditions, validate, nil)
}

// DeleteFrom is Delete starting from suggested, as GuaranteedUpdateFrom.
func (s *Store) DeleteFrom(ctx context.Context, key string, preconditions *storage.Preconditions, validate storage.ValidateDeletionFunc, suggested runtime.Object) (runtime.Object, error) {
	st, err := s.startState(ctx, key, suggested)
	if err != nil {
		return nil, err
	}
	for {
		err := checkPreconditions(key, preconditions, st.obj)
		if err == nil && validate != nil {
			err = validate(ctx, st.own())
		}
		if err != nil {
			if st.current {
				return nil, err
			}
			if st, err = s.readState(ctx, key); err != nil {
				return nil, err
			}
			continue
		}
		s.handoff.put(key, st.data, st.rev, st.obj)
		start := time.Now()
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", st.rev)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).
			Commit()
		s.opts.metrics.Request(storagemetrics.OpDelete, start, err)
		if err != nil {
			return nil, fmt.Errorf("delete %q: %w", key, err)
		}
		if resp.Succeeded {
			out := st.own()
			if err := setRV(out, resp.Header.Revision); err != nil {
				return nil, err
			}
			return out, nil
		}
		if st, err = s.elseState(key, resp); err != nil {
			return nil, err
		}
	}
}

// state is what a write starts from: an object, the revision it was
// written at, its stored bytes when read from etcd (nil when taken from a
// cache), and whether etcd just said it is current. An object taken from
// a cache is the cache's (cached), shared with its readers: it is never
// changed, and a write that hands it on hands on a copy.
type state struct {
	obj     runtime.Object
	rev     int64
	data    []byte
	current bool
	cached  bool
}

// own returns the state's object to change or hand on: a copy when it is
// the cache's.
func (st state) own() runtime.Object {
	if st.cached {
		return st.obj.DeepCopyObject()
	}
	return st.obj
}

func (s *Store) startState(ctx context.Context, key string, suggested runtime.Object) (state, error) {
	if suggested == nil {
		return s.readState(ctx, key)
	}
	m, err := meta.Accessor(suggested)
	if err != nil {
		return state{}, fmt.Errorf("read metadata of cached %q: %w", key, err)
	}
	rev, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil || rev <= 0 {
		return s.readState(ctx, key)
	}
	return state{obj: suggested, rev: rev, cached: true}, nil
}

func (s *Store) readState(ctx context.Context, key string) (state, error) {
	kv, err := s.read(ctx, key)
	if err != nil {
		return state{}, err
	}
	return s.kvState(kv)
}

func (s *Store) elseState(key string, resp *clientv3.TxnResponse) (state, error) {
	kv, err := kvFromElse(key, resp)
	if err != nil {
		return state{}, err
	}
	return s.kvState(kv)
}

func (s *Store) kvState(kv *mvccpb.KeyValue) (state, error) {
	obj, err := s.decode(kv.Value, kv.ModRevision)
	if err != nil {
		return state{}, err
	}
	return state{obj: obj, rev: kv.ModRevision, data: kv.Value, current: true}, nil
}

// read returns the stored key-value at key, or ErrCodeKeyNotFound.
func (s *Store) read(ctx context.Context, key string) (*mvccpb.KeyValue, error) {
	start := time.Now()
	resp, err := s.client.Get(ctx, key)
	s.opts.metrics.Request(storagemetrics.OpGet, start, err)
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, storage.NewError(storage.ErrCodeKeyNotFound, key, 0, "")
	}
	return resp.Kvs[0], nil
}

// kvFromElse returns the key-value a failed compare-and-swap read in its
// else branch: the state to retry from.
func kvFromElse(key string, resp *clientv3.TxnResponse) (*mvccpb.KeyValue, error) {
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, storage.NewError(storage.ErrCodeKeyNotFound, key, 0, "")
	}
	return kvs[0], nil
}

func checkPreconditions(key string, p *storage.Preconditions, obj runtime.Object) error {
	if p == nil {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("read metadata of %q: %w", key, err)
	}
	if p.UID != nil && *p.UID != m.GetUID() {
		return storage.NewError(storage.ErrCodeInvalidObj, key, 0,
			fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
		return storage.NewError(storage.ErrCodeInvalidObj, key, 0,
			fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

// encode serializes obj without its resourceVersion, which is etcd's to
// assign; obj itself is left alone.
func (s *Store) encode(obj runtime.Object) ([]byte, error) {
	obj, err := withoutRV(obj)
	if err != nil {
		return nil, err
	}
	data, err := s.codec.Encode(obj)
	if err != nil {
		return nil, fmt.Errorf("encode object: %w", err)
	}
	return data, nil
}

// decode reads stored bytes into a new object carrying resourceVersion rv.
func (s *Store) decode(data []byte, rv int64) (runtime.Object, error) {
	obj, err := s.codec.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("decode stored object: %w", err)
	}
	if err := setRV(obj, rv); err != nil {
		return nil, err
	}
	return obj, nil
}

// withoutRV returns obj without its resourceVersion. An object that has
// one is copied shallowly, its metadata apart, so obj, which may be a
// cache's and read by others, is not written to, and the rest of it is not
// copied only to be encoded.
func withoutRV(obj runtime.Object) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("read metadata: %w", err)
	}
	if m.GetResourceVersion() == "" {
		return obj, nil
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		c := &unstructured.Unstructured{Object: maps.Clone(o.Object)}
		if md, ok := o.Object["metadata"].(map[string]any); ok {
			md = maps.Clone(md)
			delete(md, "resourceVersion")
			c.Object["metadata"] = md
		}
		return c, nil
	default:
		if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct && metaByValue(v.Elem().Type()) {
			c := reflect.New(v.Elem().Type())
			c.Elem().Set(v.Elem())
			obj = c.Interface().(runtime.Object)
		} else {
			obj = obj.DeepCopyObject()
		}
		return obj, setRV(obj, 0)
	}
}

var objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()

// metaByValue reports whether t embeds its ObjectMeta by value, as every
// Kubernetes kind does: a shallow copy of it then has metadata of its own.
func metaByValue(t reflect.Type) bool {
	f, ok := t.FieldByName("ObjectMeta")
	return ok && len(f.Index) == 1 && f.Anonymous && f.Type == objectMetaType
}

func setRV(obj runtime.Object, rv int64) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("set resourceVersion: %w", err)
	}
	if rv == 0 {
		m.SetResourceVersion("")
	} else {
		m.SetResourceVersion(strconv.FormatInt(rv, 10))
	}
	return nil
}

// parseRV reads a request's resourceVersion; "" is 0.
func parseRV(rv, key string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, storage.NewError(storage.ErrCodeInvalidRequest, key, 0, fmt.Sprintf("invalid resource version %q", rv))
	}
	return n, nil
}

func tooLarge(key string, current int64) error {
	return storage.NewError(storage.ErrCodeTooLargeResourceVersion, key, current, "Too large resource version")
}

// readError turns etcd's answers about revisions it cannot serve into
// storage errors.
func readError(err error, key, doing string) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return &storage.Error{Code: storage.ErrCodeExpired, Key: key, Detail: "The resourceVersion for the provided list is too old.", Err: err}
	case errors.Is(err, rpctypes.ErrFutureRev):
		return &storage.Error{Code: storage.ErrCodeTooLargeResourceVersion, Key: key, Detail: "Too large resource version", Err: err}
	}
	return fmt.Errorf("%s %q: %w", doing, key, err)
}

// expiredStatus is the watch.Error object for a watch that starts before
// what etcd retains, worded like kube-apiserver's.
func expiredStatus(requested, compacted int64) *metav1.Status {
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    410,
		Reason:  metav1.StatusReasonExpired,
		Message: fmt.Sprintf("too old resource version: %d (%d)", requested, compacted),
	}
}
