// Package cache remembers an authenticator's answers, as kube-apiserver's
// token cache does: successes for one TTL, failures for another, in a
// bounded least-recently-used map. Entries are keyed by an HMAC of the
// requested audiences and the token under a key made at start, so neither
// the map nor a heap dump holds a usable token.
package cache
