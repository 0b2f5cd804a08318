// Package etcd3 is the storage.Interface that talks to etcd v3 directly:
// every read goes to etcd, every write is a transaction that compares the
// key's revision, and every watch is an etcd watch. It is the source of
// truth the watch cache (package cacher) is fed from and writes through.
package etcd3
