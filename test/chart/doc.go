// Package chart tests the Helm chart in charts/kplane without a cluster:
// helm lint, helm template over a matrix of values with every manifest
// decoded strictly into its k8s.io/api type, each service's command line
// checked by that service's own binary (its check-flags subcommand), the
// NetworkPolicies evaluated into who may reach whom, the bundled NATS
// configuration loaded by nats-server's own parser, the security defaults,
// and a values schema that refuses what it does not know.
//
// Helm is the one installed by make test at a pinned version; the tests
// find it through $KPLANE_HELM and fail without it.
package chart
