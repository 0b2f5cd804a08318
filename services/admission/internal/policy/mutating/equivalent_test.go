package mutating

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kplane.dev/services/admission/internal/review/reviewtest"
)

// onEvents makes p match creates of events through group only.
func onEvents(p *admissionregistrationv1.MutatingAdmissionPolicy, group string) *admissionregistrationv1.MutatingAdmissionPolicy {
	p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{"events"}},
	}}}
	return p
}

// TestEquivalent shows a policy on events.k8s.io events mutating a core
// event's create under matchPolicy Equivalent: it changes the note of the
// converted event, and the policy after it, on core events, sees that
// change as the core message. Under Exact the first policy does nothing.
func TestEquivalent(t *testing.T) {
	for _, tc := range []struct {
		policy admissionregistrationv1.MatchPolicyType
		want   string
	}{
		{admissionregistrationv1.Equivalent, "hello!"},
		{admissionregistrationv1.Exact, "hello"},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			first := onEvents(policy("a-events", jsonPatch(`[JSONPatch{op: "replace", path: "/note", value: object.note + "!"}]`)), "events.k8s.io")
			first.Spec.MatchConstraints.MatchPolicy = &tc.policy
			second := onEvents(policy("b-core", jsonPatch(`[JSONPatch{op: "add", path: "/metadata/annotations", value: {"seen": object.message}}]`)), "")
			s := &store{
				policies: []*admissionregistrationv1.MutatingAdmissionPolicy{first, second},
				bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding("a-events-b", "a-events"), binding("b-core-b", "b-core")},
			}
			out, err := newMutator(t, s).Mutate(context.Background(), reviewtest.CoreEventCreate(t, "team-a", "hello"))
			if err != nil {
				t.Fatal(err)
			}
			if out == nil {
				t.Fatal("no mutation")
			}
			msg, _, _ := unstructured.NestedString(out.Object, "message")
			if out.GetAPIVersion() != "v1" || msg != tc.want || out.GetAnnotations()["seen"] != tc.want {
				t.Errorf("mutated %v, want a core event with message and annotation seen %q", out.Object, tc.want)
			}
		})
	}
}
