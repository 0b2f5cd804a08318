package access

import (
	"slices"
	"time"

	"kplane.dev/proto/audit"
	"kplane.dev/proto/authn"
	"kplane.dev/proto/authz"
	"kplane.dev/proto/changefeed"
)

// Responders may send several messages to one reply subject (an
// acknowledgement, heartbeats, then the answer) within this bound; after
// either limit the reply subject is closed to them.
const (
	ResponseMaxMsgs = 128
	ResponseExpires = 2 * time.Minute
)

// Admission's subjects and queue group.
const (
	AdmissionSubjects   = "kplane.admission.>"
	AdmissionQueueGroup = "kplane-admission"
)

// Service names.
const (
	Gateway   = "gateway"
	Authn     = "authn"
	Authz     = "authz"
	Core      = "core"
	CRD       = "crd"
	Admission = "admission"
)

// Subscription is a subject a service may subscribe to; with Queue set,
// only as a member of that queue group.
type Subscription struct {
	Subject, Queue string
}

// Service is one row of the table.
type Service struct {
	Name string
	// Publish are the subjects the service may publish on: requests,
	// events, and JetStream API subjects.
	Publish []string
	// Subscribe are the subjects the service may subscribe to, besides
	// its inbox.
	Subscribe []Subscription
	// Responds lets the service answer requests it received: publish to
	// their reply subjects, ResponseMaxMsgs times within ResponseExpires.
	Responds bool
}

// ClientName is the name the service's connections carry.
func (s Service) ClientName() string { return "kplane-" + s.Name }

// InboxPrefix is the prefix of the service's reply subjects: it alone may
// subscribe below it.
func (s Service) InboxPrefix() string { return "_INBOX_" + s.Name }

// StreamAPI are the JetStream API subjects a stream's publisher calls:
// create the stream, read its state and one message (direct or not). Not
// update: whoever may update a stream may point it at other subjects and
// read what it stores; nor consumers, delete or purge.
func StreamAPI(name string) []string {
	return []string{
		"$JS.API.STREAM.CREATE." + name,
		"$JS.API.STREAM.INFO." + name,
		"$JS.API.STREAM.MSG.GET." + name,
		"$JS.API.DIRECT.GET." + name,
	}
}

// Services is the table: every kplane service and what it may do.
func Services() []Service {
	reviews := func(queue string, subjects ...string) []Subscription {
		subs := make([]Subscription, 0, len(subjects))
		for _, s := range subjects {
			subs = append(subs, Subscription{Subject: s, Queue: queue})
		}
		return subs
	}
	return []Service{
		{
			// The gateway writes the audit stream, creating it when it
			// is missing.
			Name: Gateway,
			Publish: slices.Concat([]string{
				authn.SubjectTokenReview, authn.SubjectIssuerDiscovery, authn.SubjectIssuerKeys,
				authz.SubjectAccessReview,
				audit.StreamSubjects,
			}, StreamAPI(audit.StreamName)),
			Subscribe: []Subscription{{Subject: authz.SubjectInvalidate}},
		},
		{
			Name:      Authn,
			Subscribe: reviews(authn.QueueGroup, authn.SubjectTokenReview, authn.SubjectTokenRequest, authn.SubjectIssuerDiscovery, authn.SubjectIssuerKeys),
			Responds:  true,
		},
		{
			Name:      Authz,
			Publish:   []string{authz.SubjectInvalidate},
			Subscribe: reviews(authz.QueueGroup, authz.SubjectAccessReview, authz.SubjectRulesReview),
			Responds:  true,
		},
		{
			Name: Core,
			Publish: slices.Concat([]string{
				authn.SubjectTokenReview, authn.SubjectTokenRequest,
				authz.SubjectAccessReview, authz.SubjectRulesReview,
				AdmissionSubjects,
				changefeed.StreamSubjects,
			}, StreamAPI(changefeed.StreamName)),
		},
		{
			Name:    CRD,
			Publish: []string{authz.SubjectAccessReview, authz.SubjectRulesReview, AdmissionSubjects},
		},
		{
			// Admission asks authz for the authorizer of CEL
			// expressions in policies and matchConditions.
			Name:      Admission,
			Publish:   []string{authz.SubjectAccessReview},
			Subscribe: reviews(AdmissionQueueGroup, AdmissionSubjects),
			Responds:  true,
		},
	}
}

// Lookup returns the row of the service called name.
func Lookup(name string) (Service, bool) {
	i := slices.IndexFunc(Services(), func(s Service) bool { return s.Name == name })
	if i < 0 {
		return Service{}, false
	}
	return Services()[i], true
}

// ByClientName returns the row of the service whose connections are named
// clientName (Service.ClientName).
func ByClientName(clientName string) (Service, bool) {
	for _, s := range Services() {
		if s.ClientName() == clientName {
			return s, true
		}
	}
	return Service{}, false
}

// ServedBy returns the service that subscribes to subject, and how.
func ServedBy(subject string) (Service, Subscription, bool) {
	for _, s := range Services() {
		for _, sub := range s.Subscribe {
			if sub.Subject == subject {
				return s, sub, true
			}
		}
	}
	return Service{}, Subscription{}, false
}
