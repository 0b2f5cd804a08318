// Package proto holds the contracts of every NATS subject kplane uses: the
// subject names, the payloads and the headers, each with its owner (the one
// service that publishes it) and its consumers. A subject not defined in a
// package below does not exist. It imports nothing but the standard
// library, so that every module may depend on it.
package proto
