package audit

const (
	// StreamName is the JetStream stream of audit events.
	StreamName = "KPLANE_AUDIT"
	// SubjectRoot starts every subject of the stream.
	SubjectRoot = "kplane.audit"
	// StreamSubjects is the subject filter of the stream.
	StreamSubjects = SubjectRoot + ".>"
	// HeaderMsgID deduplicates an event sent twice.
	HeaderMsgID = "Nats-Msg-Id"
)

// Subject is the subject of an event of stage (an audit.k8s.io/v1 Stage:
// RequestReceived, ResponseStarted, ResponseComplete or Panic).
func Subject(stage string) string { return SubjectRoot + ".events." + stage }

// MsgID is the Nats-Msg-Id of the event of auditID at stage.
func MsgID(auditID, stage string) string { return auditID + "/" + stage }
