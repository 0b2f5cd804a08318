package validating

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"kplane.dev/services/admission/internal/review/reviewtest"
)

// TestEquivalent shows a policy on events.k8s.io events judging a core/v1
// event's create under matchPolicy Equivalent, on the converted object
// (its note) with the request's kind the equivalent's and its requestKind
// the client's; under Exact the policy does not apply.
func TestEquivalent(t *testing.T) {
	const expression = `object.note != 'forbidden' && request.kind.group == 'events.k8s.io' && request.requestKind.group == '' && request.resource.group == 'events.k8s.io'`
	for _, tc := range []struct {
		policy  admissionregistrationv1.MatchPolicyType
		message string
		denied  bool
	}{
		{admissionregistrationv1.Equivalent, "fine", false},
		{admissionregistrationv1.Equivalent, "forbidden", true},
		{admissionregistrationv1.Exact, "forbidden", false},
	} {
		t.Run(string(tc.policy)+"/"+tc.message, func(t *testing.T) {
			p := policy("events", expression, func(p *P) {
				p.Spec.MatchConstraints.MatchPolicy = &tc.policy
				p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{
					rule(allOps, []string{"events.k8s.io"}, []string{"v1"}, []string{"events"}),
				}
			})
			v := newValidator(t, &store{policies: []*P{p}, bindings: []*B{binding("events-b", "events")}}, nil)
			res, err := v.Validate(context.Background(), reviewtest.CoreEventCreate(t, "default", tc.message))
			w := want{}
			if tc.denied {
				// Refused as the client wrote it: a core event.
				w = denied("events", "events-b", "failed expression: "+expression)
				w.message = `events "e" is forbidden: ` + strings.TrimPrefix(w.message, deniedPrefix)
			}
			check(t, res, err, w)
		})
	}
}
