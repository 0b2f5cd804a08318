// Package cacher is the watch cache of one resource: a storage.Interface
// that serves watches and most reads from memory and sends writes on to the
// etcd store beneath it.
//
// One underlying watch per resource, opened after an initial list, keeps an
// in-memory copy of the resource's objects (in key order) and a bounded ring
// of recent events up to date. Every client watch is served from that copy,
// so N clients cost etcd one watch. Reads follow kube-apiserver's cacher:
// resourceVersion "0" is answered from memory as is, "N" once the cache has
// seen N, and "" (a consistent read) once the cache has caught up with
// etcd's current revision, which etcd's progress notifications make
// possible even when the resource is idle. Exact-revision and paginated
// reads go to etcd.
//
// When the underlying watch ends, the cache watches again from its own
// revision, so clients lose and repeat nothing. When etcd no longer has that
// revision (it was compacted), the cache lists again and ends every client
// watch with 410 Expired, as kube-apiserver does, so clients list again too.
//
// A client watch that does not keep up is ended, as kube-apiserver ends
// one, once it is live. Until then, while it still sends the state or the
// events it started from, it is not: it falls behind and then reads what
// it missed from the ring, so that a watch-list under a steady load of
// writes is not started over and over (see catchUp).
package cacher
