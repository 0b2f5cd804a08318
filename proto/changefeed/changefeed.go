package changefeed

import (
	"encoding/json"
	"strings"
)

const (
	// StreamName is the JetStream stream of the core-resource changes.
	StreamName = "KPLANE_CHANGES"
	// SubjectRoot starts every subject of the stream.
	SubjectRoot = "kplane.changes"
	// StreamSubjects is the subject filter of the stream.
	StreamSubjects = SubjectRoot + ".>"
	// ResyncSubject carries RESYNC markers.
	ResyncSubject = SubjectRoot + ".resync"
	// CoreGroup stands for the legacy core group ("") in subjects.
	CoreGroup = "core"
)

// Headers of every message on the stream.
const (
	HeaderMsgID        = "Nats-Msg-Id"
	HeaderRevision     = "Kplane-Revision"
	HeaderRevisionPart = "Kplane-Revision-Part"
	HeaderSnapshot     = "Kplane-Snapshot"
)

// EventType says what happened to the object, as in a Kubernetes watch
// event, plus RESYNC for the marker.
type EventType string

// Event types.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	// Resync marks a gap: see the package documentation for what a
	// consumer must do.
	Resync EventType = "RESYNC"
)

// Event is the payload of every message on the stream. A RESYNC marker
// carries only Type and ResourceVersion.
type Event struct {
	Type EventType `json:"type"`
	// ResourceVersion is the etcd revision of the change (of the snapshot
	// for RESYNC), in decimal, as in metadata.resourceVersion.
	ResourceVersion string `json:"resourceVersion"`
	Group           string `json:"group,omitempty"`
	Version         string `json:"version,omitempty"`
	Resource        string `json:"resource,omitempty"`
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	// Object is the object as served (JSON, apiVersion and kind set,
	// metadata.resourceVersion equal to ResourceVersion); for DELETED, its
	// last state. Absent on RESYNC, and on a DELETED whose last state etcd
	// no longer had. A core v1 Secret comes without data and stringData
	// unless its publisher was configured to publish them (core's
	// --change-feed-secret-data).
	Object json.RawMessage `json:"object,omitempty"`
}

// Subject is the subject of a change to group/version/resource; group ""
// is the core group.
func Subject(group, version, resource string) string {
	return SubjectRoot + "." + SubjectGroup(group) + "." + version + "." + resource
}

// SubjectGroup is group as written in subjects: "core" for "", dots as
// underscores.
func SubjectGroup(group string) string {
	if group == "" {
		return CoreGroup
	}
	return strings.ReplaceAll(group, ".", "_")
}
