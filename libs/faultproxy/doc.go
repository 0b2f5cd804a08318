// Package faultproxy is a loopback TCP proxy for tests that cuts live
// connections and holds new ones on demand, so a test can make a real
// client lose its server mid-stream (a dropped watch, a partition) without
// touching the server itself.
package faultproxy
