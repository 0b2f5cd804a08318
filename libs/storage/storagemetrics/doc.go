// Package storagemetrics is the storage layer's part of kube-apiserver's
// metrics, under kube's names and labels: etcd requests by operation and
// resource, objects stored, events received from etcd, and the watch
// cache's events, initializations, revision, ended watchers and read
// waits. A service registers them once on its registry with New and hands
// each resource's stores (package etcd3 and package cacher) the share of
// one resource.
package storagemetrics
