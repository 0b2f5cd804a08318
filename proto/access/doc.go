// Package access is the table of who may do what on NATS: for each kplane
// service, the subjects it may publish (the reviews it asks for, the events
// it emits, the JetStream API calls it makes), the subjects it may
// subscribe to and in which queue group (the reviews it answers, the
// events it follows), and the prefix of its reply inboxes.
//
// A service holds one NATS identity and the server enforces its row:
// anything not listed is refused. Responders may in addition publish to
// the reply subject of a request they received, a bounded number of times
// within a bounded time (NATS allow_responses), so replies travel only to
// the requester, and requesters receive replies only on their own inbox
// prefix, which no other service may subscribe to or publish on.
//
// kplane.dev/libs/natsauth renders this table into a nats-server
// configuration; the subjects themselves are defined next to their
// payloads in the sibling packages.
package access
