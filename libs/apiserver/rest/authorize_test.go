package rest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/rest"
)

// creators allows create to the users it names, records every question,
// and answers unavailable for "broken".
type creators struct {
	mu    sync.Mutex
	users map[string]bool
	asked []authorizationv1.ResourceAttributes
}

func (c *creators) Authorize(_ context.Context, u *authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) (bool, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, *attrs)
	if u.Username == "broken" {
		return false, "", apierrors.NewServiceUnavailable("authz is away")
	}
	return attrs.Verb == "create" && c.users[u.Username], "", nil
}

func (c *creators) questions() []authorizationv1.ResourceAttributes {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.asked
	c.asked = nil
	return q
}

// TestCreateOnUpdateNeedsCreate: an apply or PUT that would create the
// object it names needs create, asked with kube's attributes and refused
// with kube's words; one that updates does not ask.
func TestCreateOnUpdateNeedsCreate(t *testing.T) {
	authz := &creators{users: map[string]bool{"bob": true}}
	f := newWriteFixture(t, rest.WithAuthorizer(authz))
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"existing"},"spec":{"size":1}}`)
	apply := func(name string) string {
		return `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"` + name + `"},"spec":{"size":2}}`
	}
	as := func(u frontproxy.User, path, body string) (int, metav1.Status) {
		t.Helper()
		client := &http.Client{Transport: frontproxy.Loopback(f.handler, u)}
		req, err := http.NewRequest(http.MethodPatch, "http://core"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", applyType)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var s metav1.Status
		_ = json.Unmarshal(data, &s)
		return resp.StatusCode, s
	}
	alice := frontproxy.User{Name: "alice", Groups: []string{"system:authenticated"}}

	code, s := as(alice, widgets+"/new?fieldManager=m", apply("new"))
	want := `widgets.example.com "new" is forbidden: User "alice" cannot create resource "widgets" in API group "example.com" in the namespace "ns"`
	if code != http.StatusForbidden || s.Reason != metav1.StatusReasonForbidden || s.Message != want ||
		s.Details == nil || s.Details.Name != "new" || s.Details.Group != "example.com" || s.Details.Kind != "widgets" {
		t.Errorf("alice applies a new widget: %d %+v\nwant 403 %q", code, s, want)
	}
	if f.stored(t, "widgets", "ns", "new") != nil {
		t.Errorf("the refused apply stored the widget")
	}
	q := authz.questions()
	if len(q) != 1 || q[0] != (authorizationv1.ResourceAttributes{Namespace: "ns", Verb: "create", Group: "example.com", Version: "v1", Resource: "widgets", Name: "new"}) {
		t.Errorf("authorizer asked %+v", q)
	}

	if code, s := as(alice, widgets+"/existing?fieldManager=m&force=true", apply("existing")); code != http.StatusOK {
		t.Errorf("alice applies to an existing widget: %d %+v", code, s)
	}
	if q := authz.questions(); len(q) != 0 {
		t.Errorf("an apply that updates asked the authorizer %+v", q)
	}
	if code, s := as(frontproxy.User{Name: "bob"}, widgets+"/bobs?fieldManager=m", apply("bobs")); code != http.StatusCreated {
		t.Errorf("bob, who may create, applies a new widget: %d %+v", code, s)
	}
	if code, s := as(frontproxy.User{Name: "root", Groups: []string{"system:masters"}}, widgets+"/roots?fieldManager=m", apply("roots")); code != http.StatusCreated {
		t.Errorf("a member of system:masters applies a new widget: %d %+v", code, s)
	}
	authz.questions()
	if code, s := as(frontproxy.User{Name: "broken"}, widgets+"/broken?fieldManager=m", apply("broken")); code != http.StatusServiceUnavailable {
		t.Errorf("an apply while the authorizer is unavailable: %d %+v, want 503", code, s)
	}
}
