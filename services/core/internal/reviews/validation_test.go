package reviews

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidation(t *testing.T) {
	ra := &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "ns"}
	nra := &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/healthz"}
	cases := []struct {
		name string
		errs func() field.ErrorList
		want string
	}{
		{"valid access review", func() field.ErrorList {
			return ValidateSubjectAccessReview(&authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "u", ResourceAttributes: ra}})
		}, "<nil>"},
		{"groups are enough", func() field.ErrorList {
			return ValidateSubjectAccessReview(&authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{Groups: []string{"g"}, NonResourceAttributes: nra}})
		}, "<nil>"},
		{"both attributes", func() field.ErrorList {
			return ValidateSubjectAccessReview(&authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "u", ResourceAttributes: ra, NonResourceAttributes: nra}})
		}, `spec.nonResourceAttributes: Invalid value: {"path":"/healthz","verb":"get"}: cannot be specified in combination with resourceAttributes`},
		{"metadata", func() field.ErrorList {
			return ValidateSubjectAccessReview(&authorizationv1.SubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: authorizationv1.SubjectAccessReviewSpec{User: "u", ResourceAttributes: ra}})
		}, `metadata: Invalid value: {"name":"x"}: must be empty`},
		{"self review needs no user", func() field.ErrorList {
			return ValidateSelfSubjectAccessReview(&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}})
		}, "<nil>"},
		{"selector without requirements", func() field.ErrorList {
			sel := *ra
			sel.LabelSelector = &authorizationv1.LabelSelectorAttributes{}
			return ValidateSelfSubjectAccessReview(&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &sel}})
		}, `spec.resourceAttributes.labelSelector.requirements: Required value: when spec.resourceAttributes.labelSelector is specified, requirements or rawSelector is required`},
		{"local review of its namespace", func() field.ErrorList {
			return ValidateLocalSubjectAccessReview(&authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: authorizationv1.SubjectAccessReviewSpec{User: "u", ResourceAttributes: ra}})
		}, "<nil>"},
		{"local review of non-resource urls", func() field.ErrorList {
			return ValidateLocalSubjectAccessReview(&authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: authorizationv1.SubjectAccessReviewSpec{User: "u", NonResourceAttributes: nra}})
		}, `spec.nonResourceAttributes: Invalid value: {"path":"/healthz","verb":"get"}: disallowed on this kind of request`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := "<nil>"
			if errs := tc.errs(); len(errs) > 0 {
				got = errs.ToAggregate().Error()
			}
			if got != tc.want {
				t.Fatalf("got %s\nwant %s", got, tc.want)
			}
		})
	}
}
