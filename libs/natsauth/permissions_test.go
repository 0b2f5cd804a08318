package natsauth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"kplane.dev/libs/natstest"
	"kplane.dev/proto/access"
	"kplane.dev/proto/audit"
	"kplane.dev/proto/authn"
	"kplane.dev/proto/authz"
	"kplane.dev/proto/changefeed"
)

// waitTimeout bounds a wait for something the server lets through.
const waitTimeout = 10 * time.Second

// denied says whether the server refused what do did on a fresh
// connection as name: the server answers a violation with an error before
// the pong a flush waits for, so LastError holds it once Flush returns.
func denied(t *testing.T, srv *natstest.Server, name string, do func(nc *nats.Conn) error) error {
	t.Helper()
	nc := srv.ConnectAs(t, name, quiet())
	if err := do(nc); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return nc.LastError()
}

// quiet keeps the expected violations out of the test's output.
func quiet() nats.Option {
	return nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
}

func subscribe(subject, queue string) func(*nats.Conn) error {
	return func(nc *nats.Conn) error {
		_, err := nc.QueueSubscribeSync(subject, queue)
		return err
	}
}

func publish(subject string) func(*nats.Conn) error {
	return func(nc *nats.Conn) error { return nc.Publish(subject, []byte("x")) }
}

// TestPermissionsDeny reproduces what a holder of one service's
// credentials would try against the others.
func TestPermissionsDeny(t *testing.T) {
	srv := natstest.StartWithAccess(t)
	type attempt struct {
		name, as string
		do       func(*nats.Conn) error
	}
	var attempts []attempt
	for _, s := range []string{"kplane.authz.>", "kplane.authn.>", authz.SubjectAccessReview, authn.SubjectTokenReview} {
		attempts = append(attempts,
			attempt{"gateway subscribes to " + s, access.Gateway, subscribe(s, "")},
			attempt{"gateway joins authz's queue on " + s, access.Gateway, subscribe(s, authz.QueueGroup)},
			attempt{"gateway joins authn's queue on " + s, access.Gateway, subscribe(s, authn.QueueGroup)},
		)
	}
	for _, s := range access.Services() {
		if s.Name != access.Authn {
			attempts = append(attempts,
				attempt{s.Name + " answers token reviews", s.Name, subscribe(authn.SubjectTokenReview, authn.QueueGroup)},
				attempt{s.Name + " listens to token reviews", s.Name, subscribe(authn.SubjectTokenReview, "")},
				attempt{s.Name + " answers token requests", s.Name, subscribe(authn.SubjectTokenRequest, authn.QueueGroup)},
			)
		}
		if s.Name != access.Authz {
			attempts = append(attempts,
				attempt{s.Name + " answers access reviews", s.Name, subscribe(authz.SubjectAccessReview, authz.QueueGroup)},
				attempt{s.Name + " publishes invalidations", s.Name, publish(authz.SubjectInvalidate)},
			)
		}
		if s.Name != access.Core {
			attempts = append(attempts,
				attempt{s.Name + " reads a message of the change feed", s.Name, publish("$JS.API.DIRECT.GET." + changefeed.StreamName)},
				attempt{s.Name + " subscribes to the change feed", s.Name, subscribe(changefeed.StreamSubjects, "")},
				attempt{s.Name + " publishes to the change feed", s.Name, publish(changefeed.Subject("", "v1", "secrets"))},
			)
		}
		if s.Name != access.Gateway {
			attempts = append(attempts,
				attempt{s.Name + " publishes an audit event", s.Name, publish(audit.Subject("ResponseComplete"))},
				attempt{s.Name + " creates the audit stream", s.Name, publish("$JS.API.STREAM.CREATE." + audit.StreamName)},
			)
		}
		attempts = append(attempts,
			attempt{s.Name + " subscribes to every inbox", s.Name, subscribe("_INBOX.>", "")},
			attempt{s.Name + " subscribes to everything", s.Name, subscribe(">", "")},
			attempt{s.Name + " lists streams", s.Name, publish("$JS.API.STREAM.LIST")},
		)
		for _, other := range access.Services() {
			if other.Name == s.Name {
				continue
			}
			attempts = append(attempts,
				attempt{s.Name + " subscribes to " + other.Name + "'s inbox", s.Name, subscribe(other.InboxPrefix()+".>", "")},
				attempt{s.Name + " publishes to " + other.Name + "'s inbox", s.Name, publish(other.InboxPrefix() + ".abc.1")},
			)
		}
	}
	attempts = append(attempts,
		attempt{"authn answers outside its queue group", access.Authn, subscribe(authn.SubjectTokenReview, "")},
		attempt{"authn publishes a token review", access.Authn, publish(authn.SubjectTokenReview)},
		attempt{"authz publishes an access review", access.Authz, publish(authz.SubjectAccessReview)},
		attempt{"core creates a consumer of the change feed", access.Core, publish("$JS.API.CONSUMER.CREATE." + changefeed.StreamName)},
		attempt{"core creates a durable consumer of the change feed", access.Core, publish("$JS.API.CONSUMER.DURABLE.CREATE." + changefeed.StreamName + ".x")},
		attempt{"core pulls from a consumer of the change feed", access.Core, publish("$JS.API.CONSUMER.MSG.NEXT." + changefeed.StreamName + ".x")},
		attempt{"core lists the consumers of the change feed", access.Core, publish("$JS.API.CONSUMER.LIST." + changefeed.StreamName)},
		attempt{"core updates the change feed", access.Core, publish("$JS.API.STREAM.UPDATE." + changefeed.StreamName)},
		attempt{"core deletes the change feed", access.Core, publish("$JS.API.STREAM.DELETE." + changefeed.StreamName)},
		attempt{"core purges the change feed", access.Core, publish("$JS.API.STREAM.PURGE." + changefeed.StreamName)},
		attempt{"core creates another stream", access.Core, publish("$JS.API.STREAM.CREATE.OTHER")},
		attempt{"core publishes outside the change feed", access.Core, publish("kplane.other")},
		attempt{"gateway subscribes to the audit stream", access.Gateway, subscribe(audit.StreamSubjects, "")},
		attempt{"gateway purges the audit stream", access.Gateway, publish("$JS.API.STREAM.PURGE." + audit.StreamName)},
		attempt{"gateway updates the audit stream", access.Gateway, publish("$JS.API.STREAM.UPDATE." + audit.StreamName)},
		attempt{"gateway creates a consumer of the audit stream", access.Gateway, publish("$JS.API.CONSUMER.CREATE." + audit.StreamName)},
	)
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			err := denied(t, srv, a.as, a.do)
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Errorf("error = %v, want a permissions violation", err)
			}
		})
	}
}

// TestPermissionsAllow checks that each service can do what it does in
// kplane, so that the denials above are not a server closed to all.
func TestPermissionsAllow(t *testing.T) {
	srv := natstest.StartWithAccess(t)
	for _, s := range access.Services() {
		for _, sub := range s.Subscribe {
			t.Run(s.Name+" subscribes to "+sub.Subject, func(t *testing.T) {
				if err := denied(t, srv, s.Name, subscribe(sub.Subject, sub.Queue)); err != nil {
					t.Errorf("error = %v", err)
				}
			})
		}
		for _, subj := range s.Publish {
			if strings.HasPrefix(subj, "$JS.") {
				continue // JetStream calls are made below
			}
			t.Run(s.Name+" publishes "+subj, func(t *testing.T) {
				if err := denied(t, srv, s.Name, publish(strings.ReplaceAll(subj, ">", "x"))); err != nil {
					t.Errorf("error = %v", err)
				}
			})
		}
	}
}

// TestReplies checks that a responder's replies, several of them, reach
// the requester, and that it cannot use a reply subject twice beyond its
// bound nor publish on an inbox it got no request from.
func TestReplies(t *testing.T) {
	srv := natstest.StartWithAccess(t)
	authnConn := srv.ConnectAs(t, access.Authn, quiet())
	reviews, err := authnConn.QueueSubscribeSync(authn.SubjectTokenReview, authn.QueueGroup)
	if err != nil {
		t.Fatal(err)
	}
	if err := authnConn.Flush(); err != nil {
		t.Fatal(err)
	}
	gw := srv.ConnectAs(t, access.Gateway)
	inbox := gw.NewInbox()
	if !strings.HasPrefix(inbox, "_INBOX_gateway.") {
		t.Fatalf("gateway inbox %q lacks its own prefix", inbox)
	}
	replies, err := gw.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.PublishRequest(authn.SubjectTokenReview, inbox, []byte("review")); err != nil {
		t.Fatal(err)
	}
	req, err := reviews.NextMsg(waitTimeout)
	if err != nil {
		t.Fatalf("authn receives the review: %v", err)
	}
	const n = 3 // an acknowledgement, a heartbeat, the answer
	for i := range n {
		if err := req.Respond([]byte{byte('0' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := authnConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := authnConn.LastError(); err != nil {
		t.Fatalf("authn answering: %v", err)
	}
	for i := range n {
		m, err := replies.NextMsg(waitTimeout)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if string(m.Data) != string(rune('0'+i)) {
			t.Errorf("reply %d = %q", i, m.Data)
		}
	}
	// The same inbox, with no request behind it, is closed to authn.
	if err := authnConn.Publish(strings.TrimSuffix(inbox, inbox[strings.LastIndex(inbox, "."):])+".other", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if err := authnConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := authnConn.LastError(); !errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("authn publishing to an inbox it got no request from: error = %v, want a permissions violation", err)
	}
}

// TestCoreChangeFeedRights makes the JetStream calls the change feed's
// publisher makes, as core: create the stream, publish with an expected
// last sequence, read the stream's state and a message; and checks that
// core cannot point the stream at other subjects once it exists.
func TestCoreChangeFeedRights(t *testing.T) {
	srv := natstest.StartWithAccess(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	js, err := jetstream.New(srv.ConnectAs(t, access.Core))
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: changefeed.StreamName, Subjects: []string{changefeed.StreamSubjects}, AllowDirect: true}
	for range 2 { // creating again the same is no error
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("create the stream: %v", err)
		}
	}
	cfg.Subjects = append(cfg.Subjects, authn.SubjectTokenReview)
	if _, err := js.CreateStream(ctx, cfg); err == nil {
		t.Error("core made the change feed's stream store token reviews")
	}
	f, err := js.PublishMsgAsync(&nats.Msg{Subject: changefeed.Subject("", "v1", "configmaps"), Data: []byte("{}")}, jetstream.WithExpectLastSequence(0))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Ok():
	case err := <-f.Err():
		t.Fatalf("publish: %v", err)
	case <-ctx.Done():
		t.Fatal("no acknowledgement")
	}
	stream, err := js.Stream(ctx, changefeed.StreamName)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if _, err := stream.GetMsg(ctx, 1); err != nil {
		t.Fatalf("read message 1: %v", err)
	}
}
