// Package storageservice is what a storage service (core, crd) is as a
// process, apart from the resources it serves: the etcd, NATS and serving
// flags every storage service shares (Options → Validate → Config), the
// connections they name, the front-proxy authentication that lets only the
// gateway in, the health endpoints (etcd checked, readiness failing from
// the start of shutdown), /metrics with kube's storage, watch-cache and
// watch metrics (to a client certificate of the client CA), a loopback
// client to the service's own API, work run on every replica or on the
// elected leader, etcd compaction, and the shutdown order that ends
// watches before waiting for requests in flight.
//
// A service builds its API (kplane.dev/libs/apiserver/server), hands it to
// Service.Serve with the readiness checks of its own, adds its work with Go
// and Lead, and calls Run:
//
//	svc, err := storageservice.New(cfg, "kplane-crd", loopbackUser)
//	api, err := apiserver.New(apiCfg)
//	err = svc.Serve(api, extraChecks...)
//	svc.Lead("crd", "naming", naming.Run)
//	err = svc.Run(ctx)
package storageservice
