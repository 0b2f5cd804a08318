package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// labelPatch is a JSON patch that sets the label key to value on an
// object with the labels given.
func labelPatch(labels map[string]string, key, value string) []byte {
	if labels == nil {
		return fmt.Appendf(nil, `[{"op":"add","path":"/metadata/labels","value":{%q:%q}}]`, key, value)
	}
	return fmt.Appendf(nil, `[{"op":"add","path":"/metadata/labels/%s","value":%q}]`, key, value)
}

// labeler is a mutating webhook that sets its label when the object lacks
// it, and records the labels of each object it is sent.
func labeler(t *testing.T, key string, seen *[]map[string]string, mu *sync.Mutex) *server {
	return startServer(t, func(_ *http.Request, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		var obj unstructured.Unstructured
		if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		*seen = append(*seen, obj.GetLabels())
		mu.Unlock()
		if _, ok := obj.GetLabels()[key]; !ok {
			resp.Patch, resp.PatchType = labelPatch(obj.GetLabels(), key, "set"), ptr(admissionv1.PatchTypeJSONPatch)
		}
	})
}

func mutatingConfig(name string, hooks ...admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
}

func TestMutatePatch(t *testing.T) {
	var mu sync.Mutex
	var seen []map[string]string
	s := labeler(t, "team", &seen, &mu)
	d := dispatcher(t, &configs{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
		mutatingConfig("config", mutating("team.example.com", s, nil)),
	}})

	in := pod(map[string]string{"app": "web"})
	res, err := d.Mutate(context.Background(), createPod(in))
	if err != nil {
		t.Fatal(err)
	}
	if res.Object == nil {
		t.Fatal("no mutated object")
	}
	if want := map[string]string{"app": "web", "team": "set"}; !reflect.DeepEqual(res.Object.GetLabels(), want) {
		t.Errorf("labels %v, want %v", res.Object.GetLabels(), want)
	}
	if _, ok := in.GetLabels()["team"]; ok {
		t.Error("the caller's object was changed")
	}

	res, err = d.Mutate(context.Background(), createPod(pod(map[string]string{"team": "mine"})))
	if err != nil {
		t.Fatal(err)
	}
	if res.Object != nil {
		t.Errorf("object %v returned although no webhook changed it", res.Object)
	}
}

// TestMutateOrder checks that configurations run by name and each sees the
// object the one before left.
func TestMutateOrder(t *testing.T) {
	var mu sync.Mutex
	var seenA, seenB []map[string]string
	a, b := labeler(t, "a", &seenA, &mu), labeler(t, "b", &seenB, &mu)
	d := dispatcher(t, &configs{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
		mutatingConfig("2-b", mutating("b.example.com", b, nil)),
		mutatingConfig("1-a", mutating("a.example.com", a, nil)),
	}})
	res, err := d.Mutate(context.Background(), createPod(pod(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seenB, []map[string]string{{"a": "set"}}) {
		t.Errorf("b saw %v, want the object a labeled", seenB)
	}
	if want := map[string]string{"a": "set", "b": "set"}; !reflect.DeepEqual(res.Object.GetLabels(), want) {
		t.Errorf("labels %v, want %v", res.Object.GetLabels(), want)
	}
	key := "mutation.webhook.admission.k8s.io/round_0_index_1"
	var ann struct {
		Configuration, Webhook string
		Mutated                bool
	}
	if err := json.Unmarshal([]byte(res.AuditAnnotations[key]), &ann); err != nil || ann.Configuration != "2-b" || ann.Webhook != "b.example.com" || !ann.Mutated {
		t.Errorf("annotation %s = %q, want b's mutation", key, res.AuditAnnotations[key])
	}
}

func TestReinvocation(t *testing.T) {
	for _, tc := range []struct {
		policy admissionregistrationv1.ReinvocationPolicyType
		// seen are the labels of the objects the first webhook is sent.
		seen []map[string]string
	}{
		{policy: admissionregistrationv1.NeverReinvocationPolicy, seen: []map[string]string{nil}},
		{policy: admissionregistrationv1.IfNeededReinvocationPolicy, seen: []map[string]string{nil, {"a": "set", "b": "set"}}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			var mu sync.Mutex
			var seenA, seenB []map[string]string
			a, b := labeler(t, "a", &seenA, &mu), labeler(t, "b", &seenB, &mu)
			d := dispatcher(t, &configs{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
				mutatingConfig("1-a", mutating("a.example.com", a, func(w *admissionregistrationv1.MutatingWebhook) {
					w.ReinvocationPolicy = &tc.policy
				})),
				mutatingConfig("2-b", mutating("b.example.com", b, nil)),
			}})
			if _, err := d.Mutate(context.Background(), createPod(pod(nil))); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(seenA, tc.seen) {
				t.Errorf("a saw %v, want %v", seenA, tc.seen)
			}
			if len(seenB) != 1 {
				t.Errorf("b, which is not reinvocable, was called %d times", len(seenB))
			}
		})
	}
}

func TestMutateBadPatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		patch   string
		delete  bool
		message string
	}{
		{
			name:    "undecodable",
			patch:   `{"op":"add"}`,
			message: `Internal error occurred: failed calling webhook "x.example.com": received undecodable patch in webhook response: `,
		},
		{
			name:    "not applicable",
			patch:   `[{"op":"replace","path":"/spec/missing","value":1}]`,
			message: `Internal error occurred: `,
		},
		{
			name:    "on a delete",
			patch:   `[{"op":"add","path":"/metadata/labels","value":{}}]`,
			delete:  true,
			message: `Internal error occurred: admission webhook "x.example.com" attempted to modify the object, which is not supported for this operation`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, func(_ *http.Request, _ *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
				resp.Patch, resp.PatchType = []byte(tc.patch), ptr(admissionv1.PatchTypeJSONPatch)
			})
			d := dispatcher(t, &configs{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
				mutatingConfig("config", mutating("x.example.com", s, func(w *admissionregistrationv1.MutatingWebhook) {
					w.Rules[0].Operations = append(w.Rules[0].Operations, admissionregistrationv1.Delete)
				})),
			}})
			a := createPod(pod(nil))
			if tc.delete {
				a.Request.Operation, a.Object, a.OldObject = admissionv1.Delete, nil, pod(nil)
			}
			_, err := d.Mutate(context.Background(), a)
			if st := statusOf(t, err); st.Code != http.StatusInternalServerError || !strings.HasPrefix(st.Message, tc.message) {
				t.Errorf("status %d %q, want 500 %q...", st.Code, st.Message, tc.message)
			}
		})
	}
}

func TestMutateFailurePolicy(t *testing.T) {
	var mu sync.Mutex
	var seen []map[string]string
	s := labeler(t, "later", &seen, &mu)
	unreachable := unreachableURL(t)
	for _, tc := range []struct {
		policy admissionregistrationv1.FailurePolicyType
		fail   bool
	}{
		{policy: admissionregistrationv1.Fail, fail: true},
		{policy: admissionregistrationv1.Ignore},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			d := dispatcher(t, &configs{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
				mutatingConfig("config",
					mutating("down.example.com", s, func(w *admissionregistrationv1.MutatingWebhook) {
						w.ClientConfig.URL, w.FailurePolicy = &unreachable, &tc.policy
					}),
					mutating("later.example.com", s, nil)),
			}})
			res, err := d.Mutate(context.Background(), createPod(pod(nil)))
			if tc.fail {
				if st := statusOf(t, err); st.Code != http.StatusInternalServerError || !strings.Contains(st.Message, `failed calling webhook "down.example.com"`) {
					t.Errorf("status %d %q, want 500 naming down.example.com", st.Code, st.Message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Object.GetLabels()["later"] != "set" {
				t.Error("the webhook after the one that failed open did not run")
			}
			if res.AuditAnnotations["failed-open.mutation.webhook.admission.k8s.io/round_0_index_0"] != "down.example.com" {
				t.Errorf("audit annotations %v lack the failed-open one", res.AuditAnnotations)
			}
		})
	}
}

// TestMutateAuditAnnotations checks the audit annotations kube makes for
// the mutating webhooks called: one per call telling whether it changed
// the object, and the patch it applied, keyed by round and by the
// webhook's place among all the mutating webhooks.
func TestMutateAuditAnnotations(t *testing.T) {
	var mu sync.Mutex
	var seen []map[string]string
	a := labeler(t, "a", &seen, &mu)
	// b writes its patch's fields out of order and spaced: the annotation
	// holds them re-encoded, as kube's does.
	b := startServer(t, func(_ *http.Request, _ *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		resp.Patch, resp.PatchType = []byte(`[ {"value": "set", "path": "/metadata/labels/b", "op": "add"} ]`), ptr(admissionv1.PatchTypeJSONPatch)
	})
	d := dispatcher(t, &configs{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
		mutatingConfig("2-b",
			// Not called, yet it takes index 1.
			mutating("skipped.example.com", b, func(w *admissionregistrationv1.MutatingWebhook) {
				w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"absent": "yes"}}
			}),
			mutating("b.example.com", b, nil)),
		mutatingConfig("1-a", mutating("a.example.com", a, func(w *admissionregistrationv1.MutatingWebhook) {
			w.ReinvocationPolicy = ptr(admissionregistrationv1.IfNeededReinvocationPolicy)
		})),
	}})
	res, err := d.Mutate(context.Background(), createPod(pod(nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"mutation.webhook.admission.k8s.io/round_0_index_0": `{"configuration":"1-a","webhook":"a.example.com","mutated":true}`,
		"patch.webhook.admission.k8s.io/round_0_index_0":    `{"configuration":"1-a","webhook":"a.example.com","patch":[{"op":"add","path":"/metadata/labels","value":{"a":"set"}}],"patchType":"JSONPatch"}`,
		"mutation.webhook.admission.k8s.io/round_0_index_2": `{"configuration":"2-b","webhook":"b.example.com","mutated":true}`,
		"patch.webhook.admission.k8s.io/round_0_index_2":    `{"configuration":"2-b","webhook":"b.example.com","patch":[{"op":"add","path":"/metadata/labels/b","value":"set"}],"patchType":"JSONPatch"}`,
		// a, reinvoked, finds its label and patches nothing.
		"mutation.webhook.admission.k8s.io/round_1_index_0": `{"configuration":"1-a","webhook":"a.example.com","mutated":false}`,
	}
	if diff := cmp.Diff(want, res.AuditAnnotations); diff != "" {
		t.Errorf("audit annotations (-want +got):\n%s", diff)
	}
}

// TestMutateRefusedKeepsAnnotations checks that when a webhook refuses
// the write, the audit annotations made until then, the webhooks' own
// among them, come back with the refusal, as kube audits them.
func TestMutateRefusedKeepsAnnotations(t *testing.T) {
	var mu sync.Mutex
	var seen []map[string]string
	a := labeler(t, "a", &seen, &mu)
	deny := startServer(t, func(_ *http.Request, _ *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		resp.Allowed = false
		resp.Result = &metav1.Status{Message: "no"}
		resp.AuditAnnotations = map[string]string{"reason": "policy"}
	})
	d := dispatcher(t, &configs{mutating: []*admissionregistrationv1.MutatingWebhookConfiguration{
		mutatingConfig("config", mutating("a.example.com", a, nil), mutating("deny.example.com", deny, nil)),
	}})
	res, err := d.Mutate(context.Background(), createPod(pod(nil)))
	if st := statusOf(t, err); st.Code != http.StatusBadRequest {
		t.Errorf("status %d %q, want deny.example.com's refusal", st.Code, st.Message)
	}
	if res == nil {
		t.Fatal("no result with the refusal")
	}
	want := map[string]string{
		"mutation.webhook.admission.k8s.io/round_0_index_0": `{"configuration":"config","webhook":"a.example.com","mutated":true}`,
		"patch.webhook.admission.k8s.io/round_0_index_0":    `{"configuration":"config","webhook":"a.example.com","patch":[{"op":"add","path":"/metadata/labels","value":{"a":"set"}}],"patchType":"JSONPatch"}`,
		"mutation.webhook.admission.k8s.io/round_0_index_1": `{"configuration":"config","webhook":"deny.example.com","mutated":false}`,
		"deny.example.com/reason":                           "policy",
	}
	if diff := cmp.Diff(want, res.AuditAnnotations); diff != "" {
		t.Errorf("audit annotations (-want +got):\n%s", diff)
	}
}
