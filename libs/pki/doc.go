// Package pki issues the certificates of a kplane installation that makes
// its own: one ECDSA P-256 certificate authority, serving certificates for
// the services (valid for 127.0.0.1, ::1 and localhost besides the names
// given) and client certificates that name a user (CN) and its groups (O),
// as Kubernetes reads them. Dir keeps them as PEM files in a directory and
// reuses what is there while it is still valid, so a development
// installation keeps its CA, and the kubeconfigs that trust it, across
// restarts.
package pki
