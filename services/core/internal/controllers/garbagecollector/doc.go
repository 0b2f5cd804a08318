// Package garbagecollector deletes objects whose owners are gone, as
// kube-controller-manager's garbage collector does: it discovers every
// resource that can be listed, watched and deleted (custom resources of
// other services included, since its endpoint is the gateway), keeps a
// graph of owner references built from metadata informers, and
//   - deletes a dependent once every owner is verified gone with a live
//     read (a same-name object with another UID counts as gone), and strips
//     the dangling references of a dependent that keeps a live owner;
//   - completes foreground deletion: an owner with the foregroundDeletion
//     finalizer loses it once no dependent blocking its deletion is left,
//     dependents being deleted in the foreground in turn;
//   - completes orphaning: an owner with the orphan finalizer has its
//     references removed from its dependents, then loses the finalizer.
//
// It keeps no state that informers cannot rebuild, so a new leader picks up
// whatever a previous one left half done.
package garbagecollector
