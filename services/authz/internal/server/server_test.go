package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/pki"
	"kplane.dev/proto/authz"
	"kplane.dev/services/authz/internal/feed"
)

func resourceSAR(user string, groups []string, verb, group, res, namespace, name string) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: res, Namespace: namespace, Name: name},
		},
	}
}

func ask(t testing.TB, e *env, sar *authorizationv1.SubjectAccessReview) (authorizationv1.SubjectAccessReviewStatus, error) {
	t.Helper()
	var out authorizationv1.SubjectAccessReview
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := natsrpc.RequestJSON(ctx, e.conn(t), authz.SubjectAccessReview, sar, &out)
	return out.Status, err
}

// eventually retries check until it passes or 5 seconds pass.
func eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func create[T any](t testing.TB, f func(context.Context, T, metav1.CreateOptions) (T, error), obj T) {
	t.Helper()
	if _, err := f(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func grantClusterRole(t testing.TB, c kubernetes.Interface, name string, rules []rbacv1.PolicyRule, subjects ...rbacv1.Subject) {
	t.Helper()
	create(t, c.RbacV1().ClusterRoles().Create, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})
	create(t, c.RbacV1().ClusterRoleBindings().Create, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   subjects,
	})
}

var alice = rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}

// statusErr says what differs between a status and the one wanted.
func statusErr(got, want authorizationv1.SubjectAccessReviewStatus) error {
	if diff := cmp.Diff(want, got); diff != "" {
		return &diffError{diff}
	}
	return nil
}

type diffError struct{ diff string }

func (e *diffError) Error() string { return "status (-want +got):\n" + e.diff }

func TestAccessReviewOverNATS(t *testing.T) {
	e := newEnv(t)
	start(t, e.options())
	c := e.api.Client
	grantClusterRole(t, c, "pod-reader", []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}, alice)
	create(t, c.RbacV1().RoleBindings("team").Create, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "missing"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "gone"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "devs"}},
	})
	allowed := authorizationv1.SubjectAccessReviewStatus{Allowed: true,
		Reason: `RBAC: allowed by ClusterRoleBinding "pod-reader" of ClusterRole "pod-reader" to User "alice"`}
	missingRole := authorizationv1.SubjectAccessReviewStatus{Reason: `RBAC: role.rbac.authorization.k8s.io "gone" not found`}
	// Each kind has an informer of its own: the RoleBinding may arrive
	// after the ClusterRoleBinding made before it.
	eventually(t, "bindings seen", func() error {
		got, err := ask(t, e, resourceSAR("alice", nil, "get", "", "pods", "ns", "p"))
		if err != nil {
			return err
		}
		if err := statusErr(got, allowed); err != nil {
			return err
		}
		if got, err = ask(t, e, resourceSAR("bob", []string{"devs"}, "get", "", "pods", "team", "p")); err != nil {
			return err
		}
		return statusErr(got, missingRole)
	})
	cases := []struct {
		name string
		sar  *authorizationv1.SubjectAccessReview
		want authorizationv1.SubjectAccessReviewStatus
		code int32
	}{
		{"allowed", resourceSAR("alice", nil, "list", "", "pods", "", ""), allowed, 0},
		{"no opinion: empty reason", resourceSAR("alice", nil, "delete", "", "pods", "ns", "p"), authorizationv1.SubjectAccessReviewStatus{}, 0},
		{"other user", resourceSAR("bob", nil, "get", "", "pods", "ns", "p"), authorizationv1.SubjectAccessReviewStatus{}, 0},
		{"binding to a missing role", resourceSAR("bob", []string{"devs"}, "get", "", "pods", "team", "p"), missingRole, 0},
		{"neither kind of attributes", &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice"}}, authorizationv1.SubjectAccessReviewStatus{}, http.StatusBadRequest},
	}
	t.Cleanup(func() {
		// Deleting the binding takes the permission away again.
		if err := c.RbacV1().ClusterRoleBindings().Delete(context.Background(), "pod-reader", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "binding deleted", func() error {
			got, err := ask(t, e, resourceSAR("alice", nil, "get", "", "pods", "ns", "p"))
			if err != nil {
				return err
			}
			return statusErr(got, authorizationv1.SubjectAccessReviewStatus{})
		})
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ask(t, e, tc.sar)
			if tc.code != 0 {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("error %v, want %d", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := statusErr(got, tc.want); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRulesReviewOverNATS(t *testing.T) {
	e := newEnv(t)
	start(t, e.options())
	c := e.api.Client
	grantClusterRole(t, c, "health", []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}, alice)
	create(t, c.RbacV1().Roles("team").Create, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cm"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}}})
	create(t, c.RbacV1().RoleBindings("team").Create, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cm"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm"}, Subjects: []rbacv1.Subject{alice}})
	want := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a"}}},
		NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}},
	}
	eventually(t, "rules", func() error {
		var got authorizationv1.SubjectRulesReviewStatus
		if err := natsrpc.RequestJSON(context.Background(), e.conn(t), authz.SubjectRulesReview, &authz.RulesReview{User: "alice", Namespace: "team"}, &got); err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return &diffError{diff}
		}
		return nil
	})
	// No namespace: only what ClusterRoleBindings grant, as core's RBAC
	// escalation checks of cluster roles need.
	var cluster authorizationv1.SubjectRulesReviewStatus
	if err := natsrpc.RequestJSON(context.Background(), e.conn(t), authz.SubjectRulesReview, &authz.RulesReview{User: "alice"}, &cluster); err != nil {
		t.Fatal(err)
	}
	wantCluster := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: want.NonResourceRules}
	if diff := cmp.Diff(wantCluster, cluster); diff != "" {
		t.Errorf("cluster-wide rules (-want +got):\n%s", diff)
	}
}

// TestRegoDenyOverridesRBAC loads the shipped policy from a directory and
// another from a ConfigMap: both deny what RBAC allows.
func TestRegoDenyOverridesRBAC(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	example, err := os.ReadFile(filepath.Join("..", "..", "policies", "protect-namespaces.rego"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "protect-namespaces.rego"), example, 0o600); err != nil {
		t.Fatal(err)
	}
	o := e.options()
	o.PolicyDir = dir
	r := start(t, o)
	c := e.api.Client
	grantClusterRole(t, c, "admin", []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}, alice)
	create(t, c.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"protected": "true"}}})
	create(t, c.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scratch"}})
	allowedByAdmin := authorizationv1.SubjectAccessReviewStatus{Allowed: true,
		Reason: `RBAC: allowed by ClusterRoleBinding "admin" of ClusterRole "admin" to User "alice"`}

	eventually(t, "protected namespace", func() error {
		got, err := ask(t, e, resourceSAR("alice", nil, "delete", "", "namespaces", "", "prod"))
		if err != nil {
			return err
		}
		return statusErr(got, authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: `namespace "prod" is protected`})
	})
	eventually(t, "unprotected namespace", func() error {
		got, err := ask(t, e, resourceSAR("alice", nil, "delete", "", "namespaces", "", "scratch"))
		if err != nil {
			return err
		}
		return statusErr(got, allowedByAdmin)
	})

	create(t, c.CoreV1().ConfigMaps("kube-system").Create, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "no-secrets", Labels: map[string]string{feed.PolicyLabel: "true"}},
		Data: map[string]string{"secrets.rego": `package kplane.authz.secrets
deny contains "secrets are off limits" if input.resourceAttributes.resource == "secrets"
`},
	})
	create(t, c.CoreV1().ConfigMaps("kube-system").Create, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "unlabelled"},
		Data:       map[string]string{"all.rego": "package kplane.authz.all\ndeny contains \"all\" if true\n"},
	})
	eventually(t, "ConfigMap policy", func() error {
		got, err := ask(t, e, resourceSAR("alice", nil, "get", "", "secrets", "scratch", "s"))
		if err != nil {
			return err
		}
		return statusErr(got, authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "secrets are off limits"})
	})
	got, err := ask(t, e, resourceSAR("alice", nil, "get", "", "pods", "scratch", "p"))
	if err != nil {
		t.Fatal(err)
	}
	if err := statusErr(got, allowedByAdmin); err != nil {
		t.Errorf("an unlabelled ConfigMap's policy is in force: %v", err)
	}

	// A broken edit of the ConfigMap keeps the last good set: secrets
	// stay denied and nothing else is.
	cm, err := c.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "no-secrets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["broken.rego"] = "package kplane.authz.broken\ndeny contains \"pods too\" if {"
	if _, err := c.CoreV1().ConfigMaps("kube-system").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broken ConfigMap read", func() error {
		if n := reloads(t, r, "failure"); n != 1 {
			return fmt.Errorf("%v failed reloads, want 1", n)
		}
		return nil
	})
	eventually(t, "policy namespace label removed", func() error {
		// The namespace's labels reach the policies' input: unlabelled,
		// prod may be deleted.
		ns, err := c.CoreV1().Namespaces().Get(context.Background(), "prod", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ns.Labels["protected"] == "true" {
			delete(ns.Labels, "protected")
			if _, err := c.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		got, err := ask(t, e, resourceSAR("alice", nil, "delete", "", "namespaces", "", "prod"))
		if err != nil {
			return err
		}
		return statusErr(got, allowedByAdmin)
	})
	for _, tc := range []struct {
		res  string
		want authorizationv1.SubjectAccessReviewStatus
	}{
		{"secrets", authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "secrets are off limits"}},
		{"pods", allowedByAdmin},
	} {
		got, err := ask(t, e, resourceSAR("alice", nil, "get", "", tc.res, "scratch", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if err := statusErr(got, tc.want); err != nil {
			t.Errorf("after a broken ConfigMap edit, %s: %v", tc.res, err)
		}
	}
}

// TestInvalidation checks that a gateway hears of an RBAC change within a
// second.
func TestInvalidation(t *testing.T) {
	e := newEnv(t)
	start(t, e.options())
	sub, err := e.conn(t).SubscribeSync(authz.SubjectInvalidate)
	if err != nil {
		t.Fatal(err)
	}
	// Let the invalidations of the start pass.
	for {
		if _, err := sub.NextMsg(300 * time.Millisecond); err != nil {
			break
		}
	}
	changed := time.Now()
	grantClusterRole(t, e.api.Client, "late", nil, alice)
	m, err := sub.NextMsg(time.Second)
	if err != nil {
		t.Fatalf("no invalidation within 1s of the change: %v", err)
	}
	var inv authz.Invalidation
	if err := json.Unmarshal(m.Data, &inv); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inv.Reason, "clusterrole") {
		t.Errorf("reason %q, want a clusterrole change", inv.Reason)
	}
	t.Logf("invalidated %v after the change", time.Since(changed))
}

// TestReplicas closes one of three replicas while clients keep asking: no
// request fails.
func TestReplicas(t *testing.T) {
	e := newEnv(t)
	var replicas []*replica
	for range 3 {
		replicas = append(replicas, start(t, e.options()))
	}
	grantClusterRole(t, e.api.Client, "reader", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}, alice)
	sar := resourceSAR("alice", nil, "get", "", "pods", "ns", "p")
	// Every replica has seen the binding once three answers in a row
	// allow; NATS spreads them.
	eventually(t, "binding seen", func() error {
		for range 30 {
			if got, err := ask(t, e, sar); err != nil || !got.Allowed {
				return &diffError{"not allowed yet"}
			}
		}
		return nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		nc := e.conn(t)
		wg.Go(func() {
			for ctx.Err() == nil {
				var out authorizationv1.SubjectAccessReview
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := natsrpc.RequestJSON(rctx, nc, authz.SubjectAccessReview, sar, &out)
				rcancel()
				if err != nil || !out.Status.Allowed {
					failed.Add(1)
					t.Errorf("request failed: %v %+v", err, out.Status)
					continue
				}
				ok.Add(1)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	replicas[1].stop()
	time.Sleep(300 * time.Millisecond)
	cancel()
	wg.Wait()
	if failed.Load() > 0 || ok.Load() == 0 {
		t.Fatalf("%d requests succeeded, %d failed", ok.Load(), failed.Load())
	}
	t.Logf("%d requests, none failed", ok.Load())
}

func TestWebhookHTTPS(t *testing.T) {
	e := newEnv(t)
	r := start(t, e.options())
	grantClusterRole(t, e.api.Client, "reader", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}, alice)
	other, err := pki.NewCA("other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Client("kube-apiserver", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + r.Addr().String()
	post := func(cert *pki.Cert, sar *authorizationv1.SubjectAccessReview) (int, []byte) {
		body, err := json.Marshal(sar)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := e.httpsClient(cert).Post(url+WebhookPath, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, data
	}
	sar := resourceSAR("alice", nil, "get", "", "pods", "ns", "p")
	eventually(t, "allowed over HTTPS", func() error {
		code, body := post(e.certs.client, sar)
		if code != http.StatusOK {
			return &diffError{string(body)}
		}
		var out authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(body, &out); err != nil {
			return err
		}
		if out.APIVersion != "authorization.k8s.io/v1" || out.Kind != "SubjectAccessReview" || out.Spec.User != "alice" {
			return &diffError{string(body)}
		}
		return statusErr(out.Status, authorizationv1.SubjectAccessReviewStatus{Allowed: true,
			Reason: `RBAC: allowed by ClusterRoleBinding "reader" of ClusterRole "reader" to User "alice"`})
	})
	cases := []struct {
		name string
		cert *pki.Cert
		sar  *authorizationv1.SubjectAccessReview
		code int
	}{
		{"no certificate", nil, sar, http.StatusUnauthorized},
		{"certificate of another CA", foreign, sar, http.StatusUnauthorized},
		{"wrong kind", e.certs.client, &authorizationv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}, http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(tc.cert, tc.sar)
			if code != tc.code {
				t.Fatalf("code %d, want %d: %s", code, tc.code, body)
			}
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || int(st.Code) != tc.code {
				t.Errorf("body %s is not a Status of %d", body, tc.code)
			}
		})
	}
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		resp, err := e.httpsClient(nil).Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", path, resp.StatusCode, data)
		}
	}
	for _, tc := range []struct {
		name string
		cert *pki.Cert
		code int
	}{
		{"no certificate", nil, http.StatusUnauthorized},
		{"a certificate of another CA", foreign, http.StatusUnauthorized},
		{"a certificate of the client CA", e.certs.client, http.StatusOK},
	} {
		resp, err := e.httpsClient(tc.cert).Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("/metrics with %s: %d, want %d", tc.name, resp.StatusCode, tc.code)
			continue
		}
		if tc.code != http.StatusOK {
			continue
		}
		for _, want := range []string{
			`kplane_authz_decisions_total{decision="allow"}`,
			`apiserver_authorization_decisions_total{decision="allowed",name="rbac",type="RBAC"}`,
		} {
			if !strings.Contains(string(data), want) {
				t.Errorf("/metrics lacks %s:\n%s", want, data)
			}
		}
	}
}

// reloads is the count of policy reloads with result.
func reloads(t testing.TB, r *replica, result string) float64 {
	t.Helper()
	families, err := r.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kplane_authz_policy_reloads_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestNoAnswersBeforeSync starts a replica whose informers cannot sync
// (its API is unreachable): it must stay out of the queue group, so that
// the reviews go to replicas that know the RBAC objects, rather than
// refuse what RBAC allows. With no other replica, a review finds nobody.
func TestNoAnswersBeforeSync(t *testing.T) {
	e := newEnv(t)
	o := e.options()
	o.Kubeconfig = apitest.UnreachableKubeconfig(t)
	cfg, err := o.Config(apitest.LogWriter{T: t})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	apitest.Run(t, "authz", s.Run)
	deadline := time.Now().Add(10 * time.Second)
	for !s.nats.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("NATS not connected after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out authorizationv1.SubjectAccessReview
	err = natsrpc.RequestJSON(ctx, e.conn(t), authz.SubjectAccessReview, resourceSAR("alice", nil, "get", "", "pods", "ns", "p"), &out)
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("review before the informers synced: %v (status %+v), want 503: no replica answers", err, out.Status)
	}
}

func TestEveryNameOverNATS(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	o := e.options()
	o.PolicyDir = dir
	start(t, o)
	c := e.api.Client
	grantClusterRole(t, c, "pod-reader", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}, alice)
	grantClusterRole(t, c, "p-deleter", []rbacv1.PolicyRule{{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"p"}}}, alice)
	everyName := func(sar *authorizationv1.SubjectAccessReview) (bool, error) {
		var out authorizationv1.SubjectAccessReview
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := natsrpc.RequestJSON(ctx, e.conn(t), authz.SubjectAccessReview, sar, &out); err != nil {
			return false, err
		}
		return out.Annotations[authz.AnnotationEveryName] == "true", nil
	}
	expect := func(what string, sar *authorizationv1.SubjectAccessReview, want bool) {
		t.Helper()
		eventually(t, what, func() error {
			got, err := everyName(sar)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("every name = %v, want %v", got, want)
			}
			return nil
		})
	}
	getPod := resourceSAR("alice", nil, "get", "", "pods", "ns", "p")
	expect("a rule without names", getPod, true)
	expect("a rule with names", resourceSAR("alice", nil, "delete", "", "pods", "ns", "p"), false)
	expect("another name under a rule with names", resourceSAR("alice", nil, "delete", "", "pods", "ns", "q"), false)
	expect("no rule at all", resourceSAR("alice", nil, "update", "", "pods", "ns", "p"), true)
	expect("a request without a name", resourceSAR("alice", nil, "list", "", "pods", "ns", ""), false)

	write := func(name, module string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(module), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("secrets.rego", "package kplane.authz.secrets\ndeny contains \"no secrets\" if input.resourceAttributes.resource == \"secrets\"\n")
	expect("a policy that does not read the name", resourceSAR("alice", nil, "get", "", "secrets", "ns", "s"), true)
	write("names.rego", "package kplane.authz.names\ndeny contains \"not that one\" if input.resourceAttributes.name == \"secret-one\"\n")
	expect("a policy that reads the name", getPod, false)
	write("names.rego", "package kplane.authz.names\ndeny contains \"not that namespace\" if input.namespace.labels.frozen == \"true\"\n")
	expect("a policy that reads the target namespace", resourceSAR("alice", nil, "get", "", "namespaces", "", "prod"), false)
	expect("a policy that reads the request's namespace", getPod, true)
}
