// Package storage defines what kplane's storage services ask of a store of
// Kubernetes objects, and the vocabulary shared by its implementations: keys,
// errors, selection predicates and the codec seam.
//
// Two implementations satisfy Interface: etcd3 talks to etcd directly, and
// cacher serves reads and watches from an in-memory watch cache fed by one
// etcd watch while sending writes on to etcd3. Both run the same conformance
// suite (package storagetest), so a handler never needs to know which one it
// holds.
//
// resourceVersion is the etcd revision: an object's is its key's mod
// revision, a list's is the revision it was read at. Writes are
// compare-and-swap on the mod revision, so no update is ever lost.
package storage
