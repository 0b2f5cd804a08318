package rpc

import "time"

// Headers of requests and replies.
const (
	// HeaderError marks an error reply: its value is the HTTP status code,
	// its body a meta.k8s.io/v1 Status.
	HeaderError = "Kplane-Error"
	// HeaderDeadline is the requester's deadline: the replica's work on
	// the request ends then.
	HeaderDeadline = "Kplane-Deadline"
	// HeaderAckBy is the latest time a replica may take the request.
	HeaderAckBy = "Kplane-Ack-By"
	// HeaderControl marks a message on the reply subject that is not the
	// reply: ControlAck or ControlHeartbeat.
	HeaderControl = "Kplane-Control"
)

// Values of HeaderControl.
const (
	// ControlAck says a replica took the request.
	ControlAck = "ack"
	// ControlHeartbeat says the replica is still working on it.
	ControlHeartbeat = "heartbeat"
)

// HeartbeatInterval is how often a replica working on a request says so.
const HeartbeatInterval = time.Second
