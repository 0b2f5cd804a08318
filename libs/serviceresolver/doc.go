// Package serviceresolver finds where a Service a Kubernetes object refers
// to listens (an APIService's spec.service, a conversion webhook's
// clientConfig.service). kplane runs no Services or Endpoints, so besides
// kube's cluster DNS rule, https://<name>.<namespace>.svc:<port>, a
// service map given on the command line says where each service is.
package serviceresolver
