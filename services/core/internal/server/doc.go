// Package server is the core-resource service as a process: it reads its
// flags (Options), checks them (Validate), loads what they point at
// (Config), and serves the built-in API groups over HTTPS from etcd (New,
// Run), on the process machinery every storage service shares
// (kplane.dev/libs/storageservice). Requests are trusted only from the gateway's client certificate
// (kplane.dev/libs/apiserver/frontproxy); /healthz, /livez and /readyz are
// open to any client, so probes need no certificate. Every replica runs
// the etcd compactor, which elects itself; the controllers and the change
// feed publisher run on the one replica that leads the controllers'
// election, and reach the API through core's own in-process loopback
// unless --api-kubeconfig points them at the gateway.
//
// Shutdown, when Run's context ends: readiness fails at once, the replica
// goes on serving for --shutdown-delay-duration, watches end,
// requests in flight finish (up to --shutdown-timeout), the leader
// resigns, then the watch caches stop and the etcd client closes.
package server
