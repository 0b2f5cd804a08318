// Package controller runs the controllers that kube-controller-manager
// runs for namespaces, against the whole API through one endpoint:
// the system namespaces exist at start, a deleted namespace is emptied of
// every namespaced object of every served resource (custom resources of
// other services included, found through discovery) before it goes, and
// every active namespace has a default ServiceAccount. Each controller is
// level-based, driven by informers, so it resumes after a restart.
package controller
