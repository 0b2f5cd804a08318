package server

import (
	"fmt"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
	"kplane.dev/libs/storage/etcd3"
	"kplane.dev/libs/storage/storagemetrics"
)

// EtcdStores stores every resource directly in etcd below prefix, with no
// watch cache. A nil logger discards.
func EtcdStores(client *clientv3.Client, prefix string, logger *slog.Logger) StoreFunc {
	logger = orDiscard(logger)
	return func(r *resource.Resource) (storage.Interface, storage.Keys, error) {
		keys := storage.NewKeys(prefix, r.GroupVersionResource.Group, r.GroupVersionResource.Resource)
		return etcd3.New(client, r.Objects, r.Objects.New, etcd3.WithLogger(logger)), keys, nil
	}
}

// CachedEtcdStores stores every resource in etcd below prefix behind a
// watch cache, which serves watches and most reads (consistent gets and
// paged lists of a custom resource's versions read etcd); the server runs
// each cache. A nil logger discards; metrics, when not nil,
// record each resource's etcd requests and watch cache.
func CachedEtcdStores(client *clientv3.Client, prefix string, logger *slog.Logger, metrics *storagemetrics.Metrics, opts ...cacher.Option) StoreFunc {
	logger = orDiscard(logger)
	return func(r *resource.Resource) (storage.Interface, storage.Keys, error) {
		keys := storage.NewKeys(prefix, r.GroupVersionResource.Group, r.GroupVersionResource.Resource)
		var m *storagemetrics.Resource
		if metrics != nil {
			m = metrics.Resource(r.GroupVersionResource.GroupResource())
		}
		direct := etcd3.New(client, r.Objects, r.Objects.New, etcd3.WithLogger(logger), etcd3.WithMetrics(m))
		copts := []cacher.Option{cacher.WithLogger(logger), cacher.WithMetrics(m)}
		if _, ok := r.Objects.(resource.VersionConverter); ok {
			// A custom resource's version: decoding may call its
			// conversion webhook, whose failure a get must report.
			copts = append(copts, cacher.WithFallibleDecoding())
		}
		c, err := cacher.New(direct, r.Objects.New, keys.Prefix(), append(copts, opts...)...)
		if err != nil {
			return nil, storage.Keys{}, fmt.Errorf("build watch cache of %s: %w", r.GroupVersionResource, err)
		}
		return c, keys, nil
	}
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
