// Package e2e holds kplane's end-to-end tests: each starts the whole
// system as make up does (harness.Start) and drives it with the stock
// kubectl and client-go.
package e2e
