// Package integration drives a server built from the generic API layer
// with client-go as controllers use it: informers that list (or watch-list),
// watch, follow bookmarks and relist after their position expires, and
// benchmarks of watch fan-out over HTTP.
package integration
