// Package coretest runs the core-resource service for tests as it runs in
// production: N in-process replicas built from flags-equivalent Options,
// over real TLS with certificates from kplane.dev/libs/pki, against one
// embedded etcd. Clients reach each replica as the gateway does, with the
// gateway's client certificate and the caller's identity in the front
// proxy headers.
package coretest
