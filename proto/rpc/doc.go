// Package rpc is the wire contract of kplane's internal request-reply over
// NATS (libs/natsrpc carries it) for every review subject: authn's, authz's
// and admission's.
//
// A request is a message with a reply subject in the requester's own inbox
// and two headers: HeaderDeadline, the requester's deadline, which bounds
// the work it asks for, and HeaderAckBy, the time by which a replica must
// have taken it. A replica that receives a request after its ack-by time
// drops it without acting: the requester, having heard nothing, sends it
// again, and must be sure that the first copy will never be acted on.
//
// A replica that takes a request answers on the reply subject first with
// an acknowledgement (HeaderControl ControlAck, no body), then with a
// heartbeat (ControlHeartbeat) every HeartbeatInterval while it works, then
// with the reply. An error reply carries HeaderError, the HTTP status code
// of the error, and a meta.k8s.io/v1 Status as its body; any other reply
// carries the subject's payload.
//
// So a requester knows at every moment which of three things happened: no
// replica took the request (NATS' no-responders status, or no
// acknowledgement by ack-by), and it may send it again; a replica is working
// on it (heartbeats), and it waits, however slow the work; or the replica
// died holding it (heartbeats stopped), and it may send it again only when
// the request is read-only, since the replica may have acted on it.
//
// Times are Unix nanoseconds in decimal. Ack-by compares the requester's
// clock with the replica's: hosts keep their clocks synchronised, as
// kube's token expiry already requires.
package rpc
