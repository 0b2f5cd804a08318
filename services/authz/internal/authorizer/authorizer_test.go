package authorizer

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/proto/authz"
)

// fixed answers the same every time.
type fixed struct {
	d      Decision
	reason string
	err    error
	asked  *int
}

func (f fixed) Authorize(context.Context, *authorizationv1.SubjectAccessReviewSpec) (Decision, string, error) {
	if f.asked != nil {
		*f.asked++
	}
	return f.d, f.reason, f.err
}

func (f fixed) RulesFor(context.Context, *authz.RulesReview) (Rules, error) { return Rules{}, f.err }

func mode(name string, f fixed) Mode { return Mode{Name: name, Authorizer: f, RuleResolver: f} }

func TestChainOrder(t *testing.T) {
	errA := errors.New("a failed")
	errB := errors.New("b failed")
	cases := []struct {
		name   string
		chain  Chain
		want   Decision
		reason string
		err    string
		asked  int
	}{
		{"empty chain", nil, NoOpinion, "", "", 0},
		{"allow first wins over deny", Chain{mode("a", fixed{d: Allow, reason: "a"}), mode("b", fixed{d: Deny, reason: "b"})}, Allow, "a", "", 1},
		{"deny first wins over allow", Chain{mode("a", fixed{d: Deny, reason: "a"}), mode("b", fixed{d: Allow, reason: "b"})}, Deny, "a", "", 1},
		{"no opinion passes on", Chain{mode("a", fixed{reason: "a"}), mode("b", fixed{d: Allow, reason: "b"})}, Allow, "b", "", 2},
		{"later modes not asked", Chain{mode("a", fixed{d: Allow}), mode("b", fixed{d: Deny})}, Allow, "", "", 1},
		{"all no opinion: reasons joined", Chain{mode("a", fixed{reason: "a"}), mode("b", fixed{}), mode("c", fixed{reason: "c"})}, NoOpinion, "a\nc", "", 3},
		{"errors aggregated", Chain{mode("a", fixed{err: errA}), mode("b", fixed{err: errB})}, NoOpinion, "", "[a failed, b failed]", 2},
		{"one error", Chain{mode("a", fixed{err: errA}), mode("b", fixed{})}, NoOpinion, "", "a failed", 2},
		{"error then allow: the deciding mode's error only", Chain{mode("a", fixed{err: errA}), mode("b", fixed{d: Allow})}, Allow, "", "", 2},
		{"AlwaysDeny before RBAC-like allow", Chain{AlwaysDeny(), mode("b", fixed{d: Allow})}, Deny, "Everything is forbidden.", "", 0},
		{"AlwaysAllow after no opinion", Chain{mode("a", fixed{reason: "a"}), AlwaysAllow()}, Allow, "", "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			asked := 0
			for i := range c.chain {
				if f, ok := c.chain[i].Authorizer.(fixed); ok {
					f.asked = &asked
					c.chain[i].Authorizer = f
				}
			}
			d, reason, err := c.chain.Authorize(context.Background(), &authorizationv1.SubjectAccessReviewSpec{User: "u"})
			errText := ""
			if err != nil {
				errText = err.Error()
			}
			if d != c.want || reason != c.reason || errText != c.err {
				t.Errorf("got %v %q %q, want %v %q %q", d, reason, errText, c.want, c.reason, c.err)
			}
			if asked != c.asked {
				t.Errorf("asked %d modes, want %d", asked, c.asked)
			}
		})
	}
}

func TestWebhook(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/authorize" {
			http.Error(w, "wrong path", http.StatusNotFound)
			return
		}
		var review authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Kind != "SubjectAccessReview" || review.APIVersion != "authorization.k8s.io/v1" {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		switch review.Spec.User {
		case "alice":
			review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "alice may"}
		case "mallory":
			review.Status = authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "never mallory"}
		case "broken":
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	// The webhook is reached with TLS, trusting only its CA, from kube's
	// kubeconfig-format configuration.
	file := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["webhook"] = &clientcmdapi.Cluster{Server: srv.URL + "/authorize", CertificateAuthorityData: certPEM(t, srv)}
	kc.AuthInfos["kplane"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "webhook", AuthInfo: "kplane"}
	kc.CurrentContext = "webhook"
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadWebhookConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWebhook(cfg, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	spec := func(user string) *authorizationv1.SubjectAccessReviewSpec {
		return &authorizationv1.SubjectAccessReviewSpec{User: user, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/x", Verb: "get"}}
	}
	steps := []struct {
		name    string
		user    string
		advance time.Duration
		want    Decision
		reason  string
		err     bool
		calls   int32
	}{
		{"allowed", "alice", 0, Allow, "alice may", false, 1},
		{"allowed, cached", "alice", 0, Allow, "alice may", false, 1},
		{"denied", "mallory", 0, Deny, "never mallory", false, 2},
		{"no opinion", "bob", 0, NoOpinion, "", false, 3},
		{"no opinion cached", "bob", 29 * time.Second, NoOpinion, "", false, 3},
		{"unauthorized expires after 30s", "bob", time.Second, NoOpinion, "", false, 4},
		{"denied expired too", "mallory", 0, Deny, "never mallory", false, 5},
		{"allowed still cached at 5m", "alice", 4*time.Minute + 29*time.Second, Allow, "alice may", false, 5},
		{"allowed expires after 5m", "alice", time.Second, Allow, "alice may", false, 6},
		{"error: no opinion, not cached", "broken", 0, NoOpinion, "", true, 7},
		{"error asked again", "broken", 0, NoOpinion, "", true, 8},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.SetTime(clk.Now().Add(s.advance))
			d, reason, err := w.Authorize(context.Background(), spec(s.user))
			if d != s.want || reason != s.reason || (err != nil) != s.err {
				t.Errorf("got %v %q %v, want %v %q error %v", d, reason, err, s.want, s.reason, s.err)
			}
			if got := calls.Load(); got != s.calls {
				t.Errorf("%d webhook calls, want %d", got, s.calls)
			}
		})
	}
}

func TestWebhookUntrusted(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a webhook with an untrusted certificate was sent a review")
	}))
	t.Cleanup(srv.Close)
	w, err := NewWebhook(&restclient.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := w.Authorize(context.Background(), &authorizationv1.SubjectAccessReviewSpec{User: "u"}); d != NoOpinion || err == nil {
		t.Errorf("got %v %v, want no opinion and a TLS error", d, err)
	}
}

func certPEM(t *testing.T, srv *httptest.Server) []byte {
	t.Helper()
	return pemEncode(srv.Certificate().Raw)
}

func pemEncode(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestWebhookMetrics counts the webhook's calls by kube's result and its
// cache's hits and misses.
func TestWebhookMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Spec.User == "broken" {
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		}
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry()
	m, err := NewWebhookMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWebhook(&restclient.Config{Host: srv.URL}, WithWebhookMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "alice", "broken"} {
		spec := &authorizationv1.SubjectAccessReviewSpec{User: user, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/x", Verb: "get"}}
		if _, _, err := w.Authorize(context.Background(), spec); (err != nil) != (user == "broken") {
			t.Fatalf("%s: %v", user, err)
		}
	}
	want := `
# HELP apiserver_authorization_webhook_evaluations_total Round-trips to authorization webhooks.
# TYPE apiserver_authorization_webhook_evaluations_total counter
apiserver_authorization_webhook_evaluations_total{name="webhook",result="canceled"} 0
apiserver_authorization_webhook_evaluations_total{name="webhook",result="error"} 1
apiserver_authorization_webhook_evaluations_total{name="webhook",result="success"} 1
apiserver_authorization_webhook_evaluations_total{name="webhook",result="timeout"} 0
# HELP kplane_authz_webhook_cache_requests_total Lookups of the webhook mode's decision cache, by whether the decision was cached (hit) or the webhook was called (miss).
# TYPE kplane_authz_webhook_cache_requests_total counter
kplane_authz_webhook_cache_requests_total{status="hit"} 1
kplane_authz_webhook_cache_requests_total{status="miss"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
