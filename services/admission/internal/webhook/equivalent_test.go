package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kplane.dev/services/admission/internal/review/reviewtest"
)

// eventsRule matches creates of events through events.k8s.io/v1 only.
var eventsRule = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{"events.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"events"}},
}

// TestValidateEquivalent shows a webhook whose rules name events.k8s.io
// seeing a core/v1 event's create under matchPolicy Equivalent, converted:
// kind and resource are events.k8s.io's, requestKind and requestResource
// the client's, and the object an events.k8s.io Event. Under Exact it is
// not called.
func TestValidateEquivalent(t *testing.T) {
	for _, policy := range []admissionregistrationv1.MatchPolicyType{admissionregistrationv1.Equivalent, admissionregistrationv1.Exact} {
		t.Run(string(policy), func(t *testing.T) {
			seen := make(chan *admissionv1.AdmissionRequest, 1)
			s := startServer(t, func(_ *http.Request, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
				seen <- req
				resp.Allowed, resp.Result = false, &metav1.Status{Message: "no events"}
			})
			d := dispatcher(t, validatingConfigs(validating("events.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.Rules, w.MatchPolicy = []admissionregistrationv1.RuleWithOperations{eventsRule}, &policy
			})))
			_, err := d.Validate(context.Background(), reviewtest.CoreEventCreate(t, "prod", "hello"))
			if policy == admissionregistrationv1.Exact {
				if err != nil || s.calls() != 0 {
					t.Fatalf("exact: %d calls, error %v; want none", s.calls(), err)
				}
				return
			}
			if err == nil || s.calls() != 1 {
				t.Fatalf("equivalent: %d calls, error %v; want one refusal", s.calls(), err)
			}
			got := <-seen
			wantEquivalent(t, got)
			var ev map[string]any
			if err := json.Unmarshal(got.Object.Raw, &ev); err != nil {
				t.Fatal(err)
			}
			if ev["apiVersion"] != "events.k8s.io/v1" || ev["note"] != "hello" {
				t.Errorf("object %v, want the events.k8s.io Event with note hello", ev)
			}
		})
	}
}

func wantEquivalent(t *testing.T, got *admissionv1.AdmissionRequest) {
	t.Helper()
	if got.Kind != metav1.GroupVersionKind(reviewtest.EventsEvents.Kind) || got.Resource != metav1.GroupVersionResource(reviewtest.EventsEvents.Resource) {
		t.Errorf("kind %v resource %v, want events.k8s.io's", got.Kind, got.Resource)
	}
	if got.RequestKind == nil || *got.RequestKind != metav1.GroupVersionKind(reviewtest.CoreEvents.Kind) ||
		got.RequestResource == nil || *got.RequestResource != metav1.GroupVersionResource(reviewtest.CoreEvents.Resource) {
		t.Errorf("requestKind %v requestResource %v, want core's", got.RequestKind, got.RequestResource)
	}
}

// TestMutateEquivalent shows a mutating webhook's patch to the
// events.k8s.io form of a core event landing in the core form: its note
// is the core message.
func TestMutateEquivalent(t *testing.T) {
	seen := make(chan *admissionv1.AdmissionRequest, 1)
	s := startServer(t, func(_ *http.Request, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		seen <- req
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType, resp.Patch = &pt, []byte(`[{"op":"replace","path":"/note","value":"rewritten"}]`)
	})
	d := dispatcher(t, &configs{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{{
		ObjectMeta: metav1.ObjectMeta{Name: "config"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{mutating("events.example.com", s, func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules, w.MatchPolicy = []admissionregistrationv1.RuleWithOperations{eventsRule}, ptr(admissionregistrationv1.Equivalent)
		})},
	}}})
	res, err := d.Mutate(context.Background(), reviewtest.CoreEventCreate(t, "prod", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	wantEquivalent(t, <-seen)
	if res.Object == nil {
		t.Fatal("the patch did not change the object")
	}
	msg, _, _ := unstructured.NestedString(res.Object.Object, "message")
	if res.Object.GetAPIVersion() != "v1" || msg != "rewritten" {
		t.Errorf("mutated object %v, want the core event with message rewritten", res.Object.Object)
	}
}

// TestIdleEquivalent shows that a webhook that would see a write only
// through an equivalent still counts for the write's resource: the phase
// is not idle for it.
func TestIdleEquivalent(t *testing.T) {
	s := startServer(t, allow)
	for _, policy := range []admissionregistrationv1.MatchPolicyType{admissionregistrationv1.Equivalent, admissionregistrationv1.Exact} {
		d := dispatcher(t, validatingConfigs(validating("events.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
			w.Rules, w.MatchPolicy = []admissionregistrationv1.RuleWithOperations{eventsRule}, &policy
		})))
		if may, want := d.MayValidate(reviewtest.CoreEventCreate(t, "prod", "hello")), policy == admissionregistrationv1.Equivalent; may != want {
			t.Errorf("%s: MayValidate %v, want %v", policy, may, want)
		}
	}
}
