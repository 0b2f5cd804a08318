// Package storagetest is the conformance suite every storage.Interface
// implementation runs against a real etcd: the direct etcd3 store and the
// watch cache must answer every create, read, list, update, delete and watch
// the same way, with kube-apiserver's semantics, and their writes must be
// linearizable.
package storagetest
