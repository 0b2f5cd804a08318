package namespace_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/services/core/internal/namespace"
)

func TestPrepareForCreate(t *testing.T) {
	cases := []struct {
		name       string
		finalizers []corev1.FinalizerName
		want       []corev1.FinalizerName
	}{
		{name: "none", want: []corev1.FinalizerName{"kubernetes"}},
		{name: "others", finalizers: []corev1.FinalizerName{"example.com/x"}, want: []corev1.FinalizerName{"example.com/x", "kubernetes"}},
		{name: "already", finalizers: []corev1.FinalizerName{"kubernetes"}, want: []corev1.FinalizerName{"kubernetes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.NamespaceSpec{Finalizers: tc.finalizers}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
			namespace.Strategy().PrepareForCreate(context.Background(), ns)
			if !slices.Equal(ns.Spec.Finalizers, tc.want) || ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != "x" {
				t.Fatalf("got %v %s %v", ns.Spec.Finalizers, ns.Status.Phase, ns.Labels)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	deleted := metav1.Now()
	cases := []struct {
		name   string
		ns     corev1.Namespace
		update bool
		want   []string
	}{
		{name: "standard finalizers", ns: corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes", "orphan", "foregroundDeletion", "example.com/x"}}}},
		{name: "unqualified finalizer", ns: corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"mine"}}},
			want: []string{`spec.finalizers: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`}},
		{name: "unqualified finalizer through finalize", update: true,
			ns:   corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes", "mine"}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			want: []string{`spec.finalizers[1]: Invalid value: "mine": name is neither a standard finalizer name nor is it fully qualified`}},
		{name: "terminating without deletionTimestamp", update: true,
			ns:   corev1.Namespace{Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			want: []string{"status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"}},
		{name: "active with deletionTimestamp", update: true,
			ns:   corev1.Namespace{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			want: []string{"status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := namespace.Strategy()
			errs := s.Validate(context.Background(), &tc.ns)
			if tc.update {
				errs = s.ValidateUpdate(context.Background(), &tc.ns, &tc.ns)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	v := namespace.Strategy().(rest.NameValidator)
	if errs := v.ValidateName("team-a", false); len(errs) != 0 {
		t.Fatalf("team-a: %v", errs)
	}
	// kube's own messages at the pinned apimachinery.
	cases := map[string]string{
		"a.b":  "must not contain dots",
		"Team": "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
	}
	for name, want := range cases {
		if errs := v.ValidateName(name, false); len(errs) != 1 || errs[0] != want {
			t.Errorf("%s: %q, want %q", name, errs, want)
		}
	}
}
