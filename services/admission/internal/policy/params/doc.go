// Package params serves the param objects of admission policy
// bindings from informers, as kube-apiserver's policy plugin does: an
// informer on a paramKind's resource starts the first time a binding
// asks for it and runs until Run returns, kinds map to resources through
// the API server's discovery (read again, at most once a second, when a
// kind is not found, so that a CRD created after start is found), and a
// param the informer has not seen yet is read from the API server
// directly. A request waits at most a second for a new informer to sync,
// as kube's does, and is then told the kind is not yet synced.
//
// Unlike kube, whose policy source stops the informers of paramKinds no
// policy uses any more, an informer here stops only when it has not been
// asked for ten minutes.
package params
