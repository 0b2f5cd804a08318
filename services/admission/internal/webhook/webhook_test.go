package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kplane.dev/libs/pki"

	"kplane.dev/services/admission/internal/review"
)

// serviceName is the service the test webhooks' certificate is issued
// for, besides the loopback names.
const serviceName = "hook.webhooks.svc"

// testCA signs every test webhook's certificate; its PEM is the caBundle.
var testCA = sync.OnceValues(func() (*pki.Cert, error) { return pki.NewCA("webhook test CA", time.Now()) })

// server is a test webhook that answers with respond and records the
// reviews it received.
type server struct {
	url     string
	ca      []byte
	mu      sync.Mutex
	reviews []map[string]any
	paths   []string
	hosts   []string
	// serverNames are the TLS server names the clients asked for.
	serverNames []string
}

func (s *server) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reviews)
}

// startServer starts an HTTPS webhook. respond gets the request and
// fills in the response; the uid and the review's apiVersion are echoed.
func startServer(t testing.TB, respond func(r *http.Request, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse)) *server {
	t.Helper()
	ca, err := testCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Serving("webhook", []string{serviceName}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ca: ca.CertPEM()}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var raw map[string]any
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		data, _ := json.Marshal(raw)
		if err := json.Unmarshal(data, &review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reviews = append(s.reviews, raw)
		s.paths = append(s.paths, r.URL.Path)
		s.hosts = append(s.hosts, r.Host)
		s.mu.Unlock()
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		respond(r, review.Request, resp)
		out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
		if err := json.NewEncoder(w).Encode(out); err != nil {
			t.Error(err)
		}
	}))
	ts.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert.TLSCertificate()},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			s.mu.Lock()
			s.serverNames = append(s.serverNames, hello.ServerName)
			s.mu.Unlock()
			return nil, nil
		},
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	s.url = ts.URL
	return s
}

func allow(*http.Request, *admissionv1.AdmissionRequest, *admissionv1.AdmissionResponse) {}

type configs struct {
	mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
	validating []*admissionregistrationv1.ValidatingWebhookConfiguration
}

func (c *configs) Mutating() ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return c.mutating, nil
}

func (c *configs) Validating() ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return c.validating, nil
}

type namespaces map[string]map[string]string

func (n namespaces) Get(_ context.Context, name string) (*corev1.Namespace, error) {
	l, ok := n[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, nil
}

// resolver sends every service to one address.
type resolver struct{ url string }

func (r resolver) ResolveEndpoint(_, _ string, _ int32) (*url.URL, error) { return url.Parse(r.url) }

var testNamespaces = namespaces{"prod": {"env": "prod"}, "dev": {"env": "dev"}}

func dispatcher(t testing.TB, c *configs) *Dispatcher {
	t.Helper()
	d, err := New(Config{Configurations: c, Namespaces: testNamespaces, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func ptr[T any](v T) *T { return &v }

var podRule = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
}

// validating is a webhook calling s that matches pods, with no side
// effects and failurePolicy Fail; change adjusts it.
func validating(name string, s *server, change func(*admissionregistrationv1.ValidatingWebhook)) admissionregistrationv1.ValidatingWebhook {
	w := admissionregistrationv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr(s.url + "/validate"), CABundle: s.ca},
		Rules:                   []admissionregistrationv1.RuleWithOperations{podRule},
		FailurePolicy:           ptr(admissionregistrationv1.Fail),
		SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
	if change != nil {
		change(&w)
	}
	return w
}

func mutating(name string, s *server, change func(*admissionregistrationv1.MutatingWebhook)) admissionregistrationv1.MutatingWebhook {
	w := admissionregistrationv1.MutatingWebhook{
		Name:                    name,
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr(s.url + "/mutate"), CABundle: s.ca},
		Rules:                   []admissionregistrationv1.RuleWithOperations{podRule},
		FailurePolicy:           ptr(admissionregistrationv1.Fail),
		SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
	if change != nil {
		change(&w)
	}
	return w
}

func validatingConfigs(hooks ...admissionregistrationv1.ValidatingWebhook) *configs {
	return &configs{validating: []*admissionregistrationv1.ValidatingWebhookConfiguration{{
		ObjectMeta: metav1.ObjectMeta{Name: "config"}, Webhooks: hooks,
	}}}
}

func pod(labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "prod"}}}
	u.SetLabels(labels)
	return u
}

// createPod is the create of pod p in namespace prod.
func createPod(obj *unstructured.Unstructured) *review.Attributes {
	return &review.Attributes{
		Request: &admissionv1.AdmissionRequest{
			UID:       "request-uid",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Name:      "p",
			Namespace: "prod",
			Operation: admissionv1.Create,
			UserInfo:  authenticationv1.UserInfo{Username: "alice"},
		},
		Object: obj,
	}
}

// statusOf is err's status, failing the test when err is not a status
// error.
func statusOf(t *testing.T, err error) metav1.Status {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	se, ok := err.(*apierrors.StatusError)
	if !ok {
		t.Fatalf("error %T %v is not a status error", err, err)
	}
	return se.ErrStatus
}

// unreachableURL is an https URL nothing listens on.
func unreachableURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "https://" + addr + "/"
}
