// Package aggregation is kube's clusterrole-aggregation controller: a
// ClusterRole with an aggregationRule gets, as its rules, the union of the
// rules of every other ClusterRole its selectors match, kept current on
// every ClusterRole change. Aggregated roles may select one another, so a
// change travels along a chain one update at a time.
package aggregation
