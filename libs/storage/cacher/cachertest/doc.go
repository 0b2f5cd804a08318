// Package cachertest runs a watch cache for a test, so that every test
// of a store behind a cache starts and stops it the same way.
package cachertest
