// Package server is the crd service as a process: it reads its flags
// (Options), checks them (Validate), loads what they point at (Config),
// and serves apiextensions.k8s.io/v1 CustomResourceDefinitions and every
// custom resource they define over HTTPS from etcd (New, Run), on the
// process machinery every storage service shares
// (kplane.dev/libs/storageservice): only the gateway's client certificate
// is trusted, health endpoints are open, watches end first on shutdown.
//
// Every replica serves every request: each follows the CRDs with a watch
// of its own and declares their custom resources to its API server
// (package registry). The elected leader maintains the CRDs' conditions,
// deletes the custom resources of deleted CRDs, and registers each served
// group-version as an APIService through --api-kubeconfig (the gateway),
// so the gateway routes it to crd.
package server
