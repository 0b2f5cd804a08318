// Package etcdtest starts a real single-member etcd (the embed package) on
// free loopback ports inside a test's temporary directory, so storage tests
// run against etcd itself rather than a fake of it.
package etcdtest
