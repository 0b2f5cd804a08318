package access_test

import (
	"strings"
	"testing"

	"kplane.dev/proto/access"
)

// TestSubjectsHaveOneServer checks that no subject is served by two
// services: a second row able to subscribe to authn's reviews could answer
// them.
func TestSubjectsHaveOneServer(t *testing.T) {
	served := map[string]string{}
	for _, s := range access.Services() {
		for _, sub := range s.Subscribe {
			if other, ok := served[sub.Subject]; ok {
				t.Errorf("%s is subscribed to by %s and %s", sub.Subject, other, s.Name)
			}
			served[sub.Subject] = s.Name
		}
	}
}

// TestInboxesAreOwn checks that every service's inbox prefix is its own and
// that no service may publish or subscribe below any inbox prefix but
// through its reply rights.
func TestInboxesAreOwn(t *testing.T) {
	seen := map[string]string{}
	for _, s := range access.Services() {
		p := s.InboxPrefix()
		if other, ok := seen[p]; ok {
			t.Errorf("%s and %s share inbox prefix %s", other, s.Name, p)
		}
		seen[p] = s.Name
		for _, subj := range s.Publish {
			if strings.HasPrefix(subj, "_INBOX") || subj == ">" {
				t.Errorf("%s may publish on %s", s.Name, subj)
			}
		}
		for _, sub := range s.Subscribe {
			if strings.HasPrefix(sub.Subject, "_INBOX") || sub.Subject == ">" {
				t.Errorf("%s may subscribe to %s", s.Name, sub.Subject)
			}
		}
	}
}

func TestLookup(t *testing.T) {
	s, ok := access.Lookup(access.Authn)
	if !ok || s.Name != access.Authn {
		t.Fatalf("Lookup(%q) = %v, %v", access.Authn, s, ok)
	}
	if s2, ok := access.ByClientName(s.ClientName()); !ok || s2.Name != access.Authn {
		t.Errorf("ByClientName(%q) = %v, %v", s.ClientName(), s2, ok)
	}
	if _, ok := access.Lookup("nope"); ok {
		t.Error("Lookup(nope) found a row")
	}
	if s, sub, ok := access.ServedBy("kplane.authz.subjectaccessreview"); !ok || s.Name != access.Authz || sub.Queue != "kplane-authz" {
		t.Errorf("ServedBy(access review) = %v, %v, %v", s.Name, sub, ok)
	}
}
