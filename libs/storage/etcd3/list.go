package etcd3

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/storagemetrics"
)

// List implements storage.Interface.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	if err := storage.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	rv, err := parseRV(opts.ResourceVersion, prefix)
	if err != nil {
		return nil, err
	}
	start := prefix
	// readRev 0 reads the latest revision, which is also what a consistent
	// list, "0" (any) and NotOlderThan (checked after the read) want.
	var readRev, minRev int64
	switch {
	case opts.Continue != "":
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, storage.NewError(storage.ErrCodeInvalidRequest, prefix, 0, "specifying resource version is not allowed when using continue")
		}
		if start, readRev, err = storage.DecodeContinue(opts.Continue, prefix); err != nil {
			return nil, err
		}
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact:
		if rv == 0 {
			return nil, storage.NewError(storage.ErrCodeInvalidRequest, prefix, 0, "resourceVersionMatch Exact requires a resourceVersion other than 0")
		}
		readRev = rv
	case opts.ResourceVersionMatch == "" || opts.ResourceVersionMatch == metav1.ResourceVersionMatchNotOlderThan:
		minRev = rv
	default:
		return nil, storage.NewError(storage.ErrCodeInvalidRequest, prefix, 0, fmt.Sprintf("unknown resourceVersionMatch %q", opts.ResourceVersionMatch))
	}

	end := clientv3.GetPrefixRangeEnd(prefix)
	batch := max(opts.Limit, 0)
	res := &storage.ListResult{Items: []runtime.Object{}}
	var firstCount int64
	for first := true; ; first = false {
		getOpts := []clientv3.OpOption{clientv3.WithRange(end)}
		if batch > 0 {
			getOpts = append(getOpts, clientv3.WithLimit(batch))
		}
		if readRev > 0 {
			getOpts = append(getOpts, clientv3.WithRev(readRev))
		}
		requested := time.Now()
		resp, err := s.client.Get(ctx, start, getOpts...)
		s.opts.metrics.Request(storagemetrics.OpList, requested, err)
		if err != nil {
			if opts.Continue != "" {
				if se := readError(err, prefix, "list"); storage.IsExpired(se) {
					return nil, &storage.Error{Code: storage.ErrCodeExpired, Key: prefix, ResourceVersion: readRev, Detail: continueExpired, Err: err}
				}
			}
			return nil, readError(err, prefix, "list")
		}
		if first {
			if resp.Header.Revision < minRev {
				return nil, tooLarge(prefix, resp.Header.Revision)
			}
			if readRev == 0 {
				// Every further page of this list reads the same revision.
				readRev = resp.Header.Revision
			}
			firstCount = resp.Count
		}
		for i, kv := range resp.Kvs {
			obj, err := s.decode(kv.Value, kv.ModRevision)
			if err != nil {
				return nil, fmt.Errorf("list %q: %w", kv.Key, err)
			}
			ok, err := opts.Predicate.Matches(obj)
			if err != nil {
				return nil, fmt.Errorf("match %q: %w", kv.Key, err)
			}
			if ok {
				res.Items = append(res.Items, obj)
			}
			if opts.Limit > 0 && int64(len(res.Items)) == opts.Limit {
				if i < len(resp.Kvs)-1 || resp.More {
					return s.page(res, prefix, string(kv.Key), readRev, firstCount, opts.Predicate.Empty())
				}
				break
			}
		}
		res.ResourceVersion = readRev
		if !resp.More || len(resp.Kvs) == 0 {
			return res, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		// A selector that filters most objects would otherwise need one
		// round trip per page-sized batch.
		if batch < s.opts.maxBatch {
			batch = min(batch*2, s.opts.maxBatch)
		}
	}
}

// continueExpired is kube-apiserver's answer to a continue token whose
// revision was compacted.
const continueExpired = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."

// page finishes a list that stopped at lastKey with keys left over.
func (s *Store) page(res *storage.ListResult, prefix, lastKey string, rev, firstCount int64, emptyPredicate bool) (*storage.ListResult, error) {
	token, err := storage.EncodeContinue(lastKey+"\x00", prefix, rev)
	if err != nil {
		return nil, err
	}
	res.Continue = token
	res.ResourceVersion = rev
	if emptyPredicate {
		// With nothing filtered, the page holds the first len(Items) of
		// the firstCount keys from the start key on.
		remaining := firstCount - int64(len(res.Items))
		res.RemainingItemCount = &remaining
	}
	return res, nil
}
