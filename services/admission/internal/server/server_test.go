package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kplane.dev/libs/pki"
	"kplane.dev/services/admission/internal/policy/mutating"
	"kplane.dev/services/admission/internal/review"
	"kplane.dev/services/admission/internal/webhook"
)

// configs holds the webhook configurations and admission policies, as
// the informers behind the interfaces would.
type configs struct {
	webhooks []*admissionregistrationv1.MutatingWebhookConfiguration
	policies []*admissionregistrationv1.MutatingAdmissionPolicy
	bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
}

func (c *configs) Mutating() ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return c.webhooks, nil
}

func (c *configs) Validating() ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return nil, nil
}

func (c *configs) Policies() ([]*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	return c.policies, nil
}

func (c *configs) Bindings() ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	return c.bindings, nil
}

type namespaces struct{}

func (namespaces) Get(_ context.Context, name string) (*corev1.Namespace, error) {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

// labelingWebhook is a real HTTPS mutating webhook that sets label b and
// annotates the audit event; it returns the webhook's client config.
func labelingWebhook(t *testing.T) admissionregistrationv1.WebhookClientConfig {
	t.Helper()
	ca, err := pki.NewCA("webhook-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Serving("webhook", []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rv admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&rv); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		jsonPatch := admissionv1.PatchTypeJSONPatch
		rv.Response = &admissionv1.AdmissionResponse{
			UID: rv.Request.UID, Allowed: true,
			Patch: []byte(`[{"op":"add","path":"/metadata/labels/b","value":"set"}]`), PatchType: &jsonPatch,
			AuditAnnotations: map[string]string{"seen": "yes"},
		}
		rv.Request = nil
		if err := json.NewEncoder(w).Encode(&rv); err != nil {
			t.Error(err)
		}
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLSCertificate()}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return admissionregistrationv1.WebhookClientConfig{URL: &ts.URL, CABundle: ca.CertPEM()}
}

// TestPoliciesRefusalKeepsWebhookAnnotations checks that when a
// MutatingAdmissionPolicy, reinvoked after the webhooks, refuses the
// write, the webhooks' audit annotations come back with the refusal, as
// kube audits the refused write with them.
func TestPoliciesRefusalKeepsWebhookAnnotations(t *testing.T) {
	rule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	c := &configs{
		webhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "config"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "hook.example.com", ClientConfig: labelingWebhook(t), Rules: []admissionregistrationv1.RuleWithOperations{rule},
				FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			}},
		}},
		// The policy labels p from label b, which it cannot read as a
		// number once the webhook has set it: reinvoked, it fails.
		policies: []*admissionregistrationv1.MutatingAdmissionPolicy{{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 1},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				FailurePolicy: &fail,
				MatchConstraints: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rule}},
				},
				ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
				Mutations: []admissionregistrationv1.Mutation{{
					PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{labels: {"p": string("b" in object.metadata.labels ? int(object.metadata.labels["b"]) : 0)}}}`},
				}},
			},
		}},
		bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{{
			ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "p"},
		}},
	}
	logger := slog.New(slog.DiscardHandler)
	policies, err := mutating.New(mutating.Config{Policies: c, Namespaces: namespaces{}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	webhooks, err := webhook.New(webhook.Config{Configurations: c, Namespaces: namespaces{}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "default", "labels": map[string]any{"a": "x"}}}}
	a := &review.Attributes{
		Request: &admissionv1.AdmissionRequest{
			UID:       "request-uid",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Name:      "c",
			Namespace: "default",
			Operation: admissionv1.Create,
			UserInfo:  authenticationv1.UserInfo{Username: "alice"},
		},
		Object: obj,
	}

	res, err := policiesThenWebhooks{policies: policies, bindings: c, webhooks: webhooks}.Mutate(context.Background(), a)
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		t.Fatalf("error %v, want the reinvoked policy's refusal", err)
	}
	if res == nil {
		t.Fatal("no result with the refusal")
	}
	want := map[string]string{
		"hook.example.com/seen":                             "yes",
		"mutation.webhook.admission.k8s.io/round_0_index_0": `{"configuration":"config","webhook":"hook.example.com","mutated":true}`,
		"patch.webhook.admission.k8s.io/round_0_index_0":    `{"configuration":"config","webhook":"hook.example.com","patch":[{"op":"add","path":"/metadata/labels/b","value":"set"}],"patchType":"JSONPatch"}`,
	}
	if diff := cmp.Diff(want, res.AuditAnnotations); diff != "" {
		t.Errorf("audit annotations (-want +got):\n%s", diff)
	}
}
