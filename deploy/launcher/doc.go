// Package launcher runs a whole kplane installation on one machine, as
// `make up` does: it issues the CA and every certificate, starts an
// embedded etcd and an embedded NATS server with JetStream (unless external
// ones are named), runs each service as its own OS process on 127.0.0.1,
// waits until each is ready, and writes an admin kubeconfig. Everything it
// keeps lives in one data directory, so a second run finds the same CA and
// the same data.
//
// The services are data (Services): a binary, a port and argument
// templates. A service that exits on its own is restarted with a backoff;
// one that keeps failing right after it starts stops the whole
// installation, since a crash loop hides its cause when restarted forever.
package launcher
