package coordination

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func ptr[T any](v T) *T { return &v }

func TestLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec coordinationv1.LeaseSpec
		want []string
	}{
		{"empty", coordinationv1.LeaseSpec{}, nil},
		{"valid", coordinationv1.LeaseSpec{HolderIdentity: ptr("a"), LeaseDurationSeconds: ptr[int32](15), LeaseTransitions: ptr[int32](0)}, nil},
		{"zero duration", coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr[int32](0)}, []string{`spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`}},
		{"negative transitions", coordinationv1.LeaseSpec{LeaseTransitions: ptr[int32](-1)}, []string{`spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0`}},
		{"kube strategy", coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.OldestEmulationVersion), PreferredHolder: ptr("a")}, nil},
		{"unknown kube strategy", coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.CoordinatedLeaseStrategy("Newest"))}, []string{`spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"`}},
		{"custom strategy", coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.CoordinatedLeaseStrategy("example.com/mine"))}, nil},
		{"bad custom strategy", coordinationv1.LeaseSpec{Strategy: ptr(coordinationv1.CoordinatedLeaseStrategy("example.com/-x"))}, []string{
			`spec.strategy.strategy: Invalid value: "example.com/-x": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		}},
		{"preferred holder without strategy", coordinationv1.LeaseSpec{PreferredHolder: ptr("a")}, []string{"spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := &coordinationv1.Lease{Spec: tc.spec}
			for _, errs := range [][]string{
				messages(LeaseStrategy().Validate(context.Background(), lease)),
				messages(LeaseStrategy().ValidateUpdate(context.Background(), lease, &coordinationv1.Lease{})),
			} {
				if strings.Join(errs, "\n") != strings.Join(tc.want, "\n") {
					t.Fatalf("errors:\n got %q\nwant %q", errs, tc.want)
				}
			}
		})
	}
}

func messages(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
