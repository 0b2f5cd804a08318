// Package changefeed publishes every committed change under an etcd
// registry prefix to a JetStream stream, once and in commit order, and
// lets a consumer follow that stream from a list's resourceVersion. The
// subjects, headers and payload are those of kplane.dev/proto/changefeed,
// whose documentation says what a consumer sees and must do.
//
// A Publisher runs on one replica at a time, under kplane.dev/libs/election:
//
//	p := changefeed.NewPublisher(etcd, js, "/kplane", changefeed.WithKinds(kinds))
//	election.Run(ctx, etcd, "/kplane/changefeed", func(ctx context.Context, _ election.Term) error {
//		return p.Run(ctx)
//	})
//
// Failover loses and repeats nothing. A new leader reads the stream's last
// message back (its revision headers) and continues from there: the etcd
// watch starts right after the last published change, or the interrupted
// snapshot continues after its last key. Every publish expects the stream's
// last sequence to be the one this publisher last wrote, so a former leader
// that has not yet noticed it lost the lead is refused by JetStream itself
// rather than interleaving its messages (this fences the stream the way
// election.Term.Guard fences etcd writes); message IDs derived from the
// revision and key let JetStream drop a repeated message as well.
//
// Subscribe starts a consumer at the first message after a list's
// resourceVersion, found by binary search over the stream's sequences
// (revisions never decrease along the stream), and delivers in order.
package changefeed
