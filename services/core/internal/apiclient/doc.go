// Package apiclient builds the clients core's controllers use to act on the
// whole API: typed, dynamic, metadata and discovery clients of one
// endpoint. In production that endpoint is the gateway, so controllers see
// every group of every service, custom resources included; tests and a core
// running alone point it at core's own loopback.
package apiclient
