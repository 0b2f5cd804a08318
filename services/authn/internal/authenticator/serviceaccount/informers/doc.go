// Package informers implements the serviceaccount package's Getter, and the
// bootstrap package's SecretGetter, over client-go informers on the API
// (through the gateway): service accounts and secrets are read from the
// informers' caches, falling back to a live read for one the cache does not
// hold yet (as kube-apiserver's getter does, so a token issued a moment
// after its service account was created is not refused); pods and nodes,
// which only pod- and node-bound tokens name, are read live rather than
// kept for the whole cluster.
package informers
