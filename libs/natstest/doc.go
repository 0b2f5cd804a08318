// Package natstest runs a real NATS server with JetStream inside a test
// process, on a free loopback port with its store under the test's
// temporary directory, and stops it when the test ends.
package natstest
