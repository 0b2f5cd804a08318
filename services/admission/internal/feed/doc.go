// Package feed follows, through client-go informers over the API (the
// gateway), what the admission chain is configured by: the webhook
// configurations, the admission policies and their bindings, and the
// namespaces whose labels selectors match. Every replica runs its own
// informers, so a new webhook or policy takes effect on each within a
// watch event's delay.
//
// Until every informer has listed once the configuration is unknown, and
// a replica must not guess that nothing is configured: HasSynced tells
// the chain when it may decide.
package feed
