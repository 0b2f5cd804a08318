// Package server is the admission service as a process: it reads its
// flags (Options), checks them (Validate), and answers the admission
// reviews of kplane.dev/proto/admission on NATS, each replica in the
// queue group, so that more replicas are more capacity. Health (to
// anyone) and metrics (to a client certificate of --client-ca-file) are
// served over HTTPS. The webhook configurations, policies
// and namespaces are read through the API (--kubeconfig) by informers;
// /readyz fails until they have been read. On shutdown the reviews delivered before
// it finish and the others go to the remaining replicas.
package server
