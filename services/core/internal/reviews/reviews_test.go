package reviews_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/proto/authn"
	"kplane.dev/proto/authz"
	"kplane.dev/services/core/internal/coretest"
	"kplane.dev/services/core/internal/server"
)

var alice = frontproxy.User{Name: "alice", UID: "uid-alice", Groups: []string{"dev", "system:authenticated"}, Extra: map[string][]string{"scopes": {"read"}}}

// fakeAuth is the trivial authn and authz the tests answer with: token
// "good" is bob, alice may get anything, and alice holds get on
// configmaps in ns1. It records the access reviews it was asked.
type fakeAuth struct {
	mu   sync.Mutex
	sars []authorizationv1.SubjectAccessReviewSpec
	reqs []authn.TokenRequest
}

func (f *fakeAuth) serve(t *testing.T, c *coretest.Cluster) {
	coretest.Answer(t, c, authn.SubjectTokenReview, func(in *authenticationv1.TokenReview) (any, error) {
		if in.Spec.Token != "good" {
			in.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
			return in, nil
		}
		in.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "bob"}, Audiences: in.Spec.Audiences}
		return in, nil
	})
	coretest.Answer(t, c, authz.SubjectAccessReview, func(in *authorizationv1.SubjectAccessReview) (any, error) {
		f.mu.Lock()
		f.sars = append(f.sars, in.Spec)
		f.mu.Unlock()
		ra := in.Spec.ResourceAttributes
		in.Status.Allowed = in.Spec.User == "alice" && ra != nil && ra.Verb == "get"
		return in, nil
	})
	coretest.Answer(t, c, authz.SubjectRulesReview, func(in *authz.RulesReview) (any, error) {
		var s authorizationv1.SubjectRulesReviewStatus
		if in.User == "alice" && in.Namespace == "ns1" {
			s.ResourceRules = []authorizationv1.ResourceRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}
		}
		return s, nil
	})
	coretest.Answer(t, c, authn.SubjectTokenRequest, func(in *authn.TokenRequest) (any, error) {
		f.mu.Lock()
		f.reqs = append(f.reqs, *in)
		f.mu.Unlock()
		var tr authenticationv1.TokenRequest
		if err := json.Unmarshal(in.Request, &tr); err != nil {
			return nil, err
		}
		tr.Status = authenticationv1.TokenRequestStatus{Token: "signed-for-" + in.ServiceAccountUID, ExpirationTimestamp: metav1.NewTime(time.Unix(4102444800, 0))}
		return tr, nil
	})
}

func (f *fakeAuth) lastSAR() authorizationv1.SubjectAccessReviewSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sars[len(f.sars)-1]
}

func (f *fakeAuth) lastTokenRequest() authn.TokenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

func start(t *testing.T, nats bool) (*coretest.Cluster, *kubernetes.Clientset) {
	t.Helper()
	c := coretest.Start(t, coretest.Options{NATS: nats, Modify: func(o *server.Options) { o.ReviewTimeout = 300 * time.Millisecond }})
	kube, err := kubernetes.NewForConfig(c.Replicas[0].As(t, alice))
	if err != nil {
		t.Fatal(err)
	}
	return c, kube
}

func resourceSAR(verb string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: verb, Resource: "configmaps", Namespace: "ns1"}
}

// wantStatus fails unless err is the status error kube would answer.
func wantStatus(t *testing.T, err error, code int32, message string) {
	t.Helper()
	var se *apierrors.StatusError
	if !asStatus(err, &se) || se.ErrStatus.Code != code || se.ErrStatus.Message != message {
		t.Fatalf("got %v, want %d %q", err, code, message)
	}
}

func asStatus(err error, se **apierrors.StatusError) bool {
	s, ok := err.(*apierrors.StatusError)
	*se = s
	return ok
}

func TestReviews(t *testing.T) {
	c, kube := start(t, true)
	ctx := context.Background()

	// Before authz answers, a review is unavailable, not an error of the
	// caller's.
	_, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: resourceSAR("get")}}, metav1.CreateOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("review without authz: %v, want 503", err)
	}

	f := &fakeAuth{}
	f.serve(t, c)

	t.Run("selfsubjectreview", func(t *testing.T) {
		got, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := got.Status.UserInfo
		if u.Username != "alice" || u.UID != "uid-alice" || !slices.Equal(u.Groups, alice.Groups) || !slices.Equal(u.Extra["scopes"], []string{"read"}) {
			t.Fatalf("userInfo %+v", u)
		}
	})
	t.Run("tokenreview", func(t *testing.T) {
		got, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "good", Audiences: []string{"a"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Status.Authenticated || got.Status.User.Username != "bob" || !slices.Equal(got.Status.Audiences, []string{"a"}) {
			t.Fatalf("status %+v", got.Status)
		}
		got, err = kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "bad"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Authenticated || got.Status.Error != "invalid bearer token" {
			t.Fatalf("status %+v", got.Status)
		}
		_, err = kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
		wantStatus(t, err, http.StatusBadRequest, "token is required for TokenReview in authentication")
	})
	t.Run("subjectaccessreview", func(t *testing.T) {
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: resourceSAR("get")}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Status.Allowed {
			t.Fatalf("status %+v", got.Status)
		}
		_, err = kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{}, metav1.CreateOptions{})
		wantStatus(t, err, http.StatusUnprocessableEntity, `.authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: "": at least one of user or group must be specified]`)
	})
	t.Run("selfsubjectaccessreview", func(t *testing.T) {
		got, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: resourceSAR("get")}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		asked := f.lastSAR()
		if !got.Status.Allowed || asked.User != "alice" || asked.UID != "uid-alice" || !slices.Equal(asked.Groups, alice.Groups) || !slices.Equal(asked.Extra["scopes"], []string{"read"}) {
			t.Fatalf("status %+v, asked %+v", got.Status, asked)
		}
		got, err = kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: resourceSAR("delete")}}, metav1.CreateOptions{})
		if err != nil || got.Status.Allowed {
			t.Fatalf("delete: %v %+v", err, got.Status)
		}
	})
	t.Run("localsubjectaccessreview", func(t *testing.T) {
		lsar := func(ns string) *authorizationv1.LocalSubjectAccessReview {
			return &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: resourceSAR("get")}, ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
		}
		got, err := kube.AuthorizationV1().LocalSubjectAccessReviews("ns1").Create(ctx, lsar("ns1"), metav1.CreateOptions{})
		if err != nil || !got.Status.Allowed {
			t.Fatalf("%v %+v", err, got)
		}
		other := lsar("ns2")
		other.Spec.ResourceAttributes.Namespace = "ns2"
		_, err = kube.AuthorizationV1().LocalSubjectAccessReviews("ns1").Create(ctx, other, metav1.CreateOptions{})
		wantStatus(t, err, http.StatusBadRequest, "the namespace of the provided object does not match the namespace sent on the request")
		other.Namespace = ""
		_, err = kube.AuthorizationV1().LocalSubjectAccessReviews("ns1").Create(ctx, other, metav1.CreateOptions{})
		wantStatus(t, err, http.StatusUnprocessableEntity, `.authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: Invalid value: "ns2": must match metadata.namespace`)
	})
	t.Run("selfsubjectrulesreview", func(t *testing.T) {
		got, err := kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "ns1"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.ResourceRules) != 1 || got.Status.ResourceRules[0].Resources[0] != "configmaps" {
			t.Fatalf("status %+v", got.Status)
		}
		_, err = kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{}, metav1.CreateOptions{})
		wantStatus(t, err, http.StatusBadRequest, "no namespace on request")
	})
	t.Run("response object", func(t *testing.T) {
		body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","resource":"configmaps"}}}`
		raw, err := kube.AuthorizationV1().RESTClient().Post().AbsPath("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").SetHeader("Content-Type", "application/json").Body([]byte(body)).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Metadata is echoed; apimachinery v0.37 leaves a zero
		// creationTimestamp out (omitzero) where older kube wrote null.
		for _, want := range []string{`"apiVersion":"authorization.k8s.io/v1"`, `"kind":"SelfSubjectAccessReview"`, `"metadata":{}`, `"status":{"allowed":true}`} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("response %s lacks %s", raw, want)
			}
		}
	})
	t.Run("reviews are not stored", func(t *testing.T) {
		_, err := kube.AuthorizationV1().RESTClient().Get().AbsPath("/apis/authorization.k8s.io/v1/subjectaccessreviews").DoRaw(ctx)
		if !apierrors.IsMethodNotSupported(err) {
			t.Fatalf("list of reviews: %v, want 405", err)
		}
	})
}

func TestDiscovery(t *testing.T) {
	_, kube := start(t, false)
	for gv, names := range map[string][]string{
		"authentication.k8s.io/v1": {"selfsubjectreviews", "tokenreviews"},
		"authorization.k8s.io/v1":  {"localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews"},
	} {
		list, err := kube.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range list.APIResources {
			got = append(got, r.Name)
			if !slices.Equal(r.Verbs, []string{"create"}) {
				t.Errorf("%s %s verbs %v, want [create]", gv, r.Name, r.Verbs)
			}
			if r.Namespaced != (r.Name == "localsubjectaccessreviews") {
				t.Errorf("%s %s namespaced %v", gv, r.Name, r.Namespaced)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, names) {
			t.Errorf("%s resources %v, want %v", gv, got, names)
		}
	}
	core, err := kube.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(core.APIResources, func(r metav1.APIResource) bool { return r.Name == "serviceaccounts/token" })
	if i < 0 {
		t.Fatal("no serviceaccounts/token in discovery")
	}
	if r := core.APIResources[i]; r.Group != "authentication.k8s.io" || r.Version != "v1" || r.Kind != "TokenRequest" || !slices.Equal(r.Verbs, []string{"create"}) {
		t.Fatalf("serviceaccounts/token: %+v", r)
	}
	doc, err := kube.RESTClient().Get().AbsPath("/openapi/v2").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"`, `"io.k8s.api.authentication.v1.TokenReview"`,
		`"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"`, `"io.k8s.api.authentication.v1.TokenRequest"`} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("OpenAPI v2 lacks %s", want)
		}
	}
}

func TestWithoutNATS(t *testing.T) {
	_, kube := start(t, false)
	ctx := context.Background()
	_, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: resourceSAR("get")}}, metav1.CreateOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("access review: %v, want 503", err)
	}
	_, err = kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "good"}}, metav1.CreateOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("token review: %v, want 503", err)
	}
	// Who the caller is needs no other service.
	if _, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("selfsubjectreview: %v", err)
	}
}

func TestTokenRequest(t *testing.T) {
	c, kube := start(t, true)
	f := &fakeAuth{}
	f.serve(t, c)
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(c.Replicas[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	request := func(ref *authenticationv1.BoundObjectReference) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"api"}, BoundObjectRef: ref}}
	}

	got, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "builder", request(nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Token != "signed-for-"+string(sa.UID) {
		t.Fatalf("token %q", got.Status.Token)
	}
	if q := f.lastTokenRequest(); q.Namespace != "default" || q.ServiceAccountName != "builder" || q.BoundObject != nil {
		t.Fatalf("authn asked %+v", q)
	}

	if _, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "builder", request(&authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: "s1", UID: secret.UID}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if q := f.lastTokenRequest(); q.BoundObject == nil || q.BoundObject.UID != string(secret.UID) || q.BoundObject.Kind != "Secret" {
		t.Fatalf("authn asked %+v", q)
	}

	cases := []struct {
		name, sa string
		ref      *authenticationv1.BoundObjectReference
		code     int32
		message  string
	}{
		{name: "missing service account", sa: "nobody", code: http.StatusNotFound, message: `serviceaccounts "nobody" not found`},
		{name: "bound secret uid mismatch", sa: "builder", ref: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: "s1", UID: "wrong"},
			code: http.StatusConflict, message: `Operation cannot be fulfilled on Secret "s1": the UID in the bound object reference (wrong) does not match the UID in record. The object might have been deleted and then recreated`},
		{name: "missing bound secret", sa: "builder", ref: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: "gone"},
			code: http.StatusNotFound, message: `secrets "gone" not found`},
		{name: "bound pod", sa: "builder", ref: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p"},
			code: http.StatusNotFound, message: `pods "p" not found`},
		{name: "bound to another kind", sa: "builder", ref: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "c"},
			code: http.StatusBadRequest, message: `cannot bind token to object of type /v1, Kind=ConfigMap`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, tc.sa, request(tc.ref), metav1.CreateOptions{})
			wantStatus(t, err, tc.code, tc.message)
		})
	}
}
