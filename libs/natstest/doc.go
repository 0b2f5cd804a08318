// Package natstest runs a real NATS server with JetStream inside a test
// process, on a free loopback port with its store under the test's
// temporary directory, and stops it when the test ends. StartWithAccess
// runs it as an installation does, admitting each kplane service with its
// own key and only the permissions of kplane.dev/proto/access, so that a
// test meets the refusals a service would meet.
package natstest
