// Package changefeed defines the change feed: every committed change to a
// stored resource, published once and in etcd commit order to a JetStream
// stream, so that services and outside consumers follow changes without
// reading etcd.
//
// # Stream and subjects
//
// Stream KPLANE_CHANGES (StreamName) holds the subjects under
// "kplane.changes.>" (StreamSubjects).
//
//	kplane.changes.<group>.<version>.<resource>   one change (Event, type ADDED, MODIFIED or DELETED)
//	kplane.changes.resync                         a resync marker (Event, type RESYNC)
//
// <group> is the API group with its dots written as underscores
// ("rbac_authorization_k8s_io"), and "core" for the legacy core group, so
// that every change subject has exactly five tokens and wildcards such as
// "kplane.changes.*.v1.configmaps" work (Subject builds them).
//
// Owner: the core-resource service (services/core) publishes every subject
// above, for every key under its etcd registry prefix, from one leader at a
// time (the change-feed publisher of kplane.dev/libs/changefeed, run under
// leader election).
//
// Consumers: outside consumers, and any kplane service that keeps a cache
// of core resources (the gateway's APIService routes, authz's RBAC
// objects, admission's webhook configurations and policies may follow it
// instead of polling the API); none of them reads etcd. Consumers only
// read: the publisher alone writes the stream.
//
// The crd service will publish the changes of custom resources on a stream
// and subject root of its own, defined here when it does; until then it
// publishes nothing.
//
// # Messages
//
// The payload is an Event in JSON. Headers:
//
//   - Nats-Msg-Id (HeaderMsgID): derived from the etcd revision and key, so
//     that JetStream drops a message a second publisher sends again.
//   - Kplane-Revision (HeaderRevision): the etcd revision the message
//     belongs to; it never decreases along the stream.
//   - Kplane-Revision-Part (HeaderRevisionPart): "i/n" on a change, the
//     i-th of the n published changes of one etcd revision (a transaction
//     may change several keys at once).
//   - Kplane-Snapshot (HeaderSnapshot): "true" on a resync marker and on
//     the ADDED events of the snapshot that follows it.
//
// # Order and resync
//
// Changes arrive in commit order, each once. Event.ResourceVersion is the
// etcd revision of the change (for DELETED, the revision of the deletion;
// the object is the last state before it, carrying that resourceVersion as
// a kube-apiserver watch does).
//
// When the publisher cannot continue where the stream ends (the stream is
// new or empty, or etcd compacted the revisions it still had to publish) it
// publishes a RESYNC marker with the revision R of a fresh list, then one
// ADDED event per object stored at R (in key order, Kplane-Snapshot set,
// each object with its own resourceVersion), then the changes after R.
// Changes between the previous message and R are lost, deletions included.
// A consumer that sees RESYNC must drop the state it built from the feed for
// the resources it follows and rebuild it from the snapshot events that
// follow (or from a list of the API at resourceVersion R or later, skipping
// events up to that list's resourceVersion).
//
// # Starting from a list
//
// To follow changes after a list of the API at resourceVersion RV, start at
// the first message whose Kplane-Revision is greater than RV (the stream's
// revisions never decrease, so a binary search over sequences finds it) and
// skip any later message whose revision is not greater than RV; also
// subscribe to the resync subject. kplane.dev/libs/changefeed.Subscribe
// does exactly that.
package changefeed
