package validating

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
)

// BenchmarkValidateTenPolicies is one write past ten policies that all
// match it and pass it: the cost admission adds per write with the
// workload of the comparison (go test -bench ValidateTen).
func BenchmarkValidateTenPolicies(b *testing.B) {
	s := &store{}
	for i := range 10 {
		name := fmt.Sprintf("p%d", i)
		s.policies = append(s.policies, policy(name, fmt.Sprintf("object.spec.replicas < %d", 100+i)))
		s.bindings = append(s.bindings, binding(name, name))
	}
	v, err := New(Config{Policies: s, Namespaces: namespaces{"default": {"env": "prod"}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	a := createDeployment(3, nil)
	for b.Loop() {
		if _, err := v.Validate(context.Background(), a); err != nil {
			b.Fatal(err)
		}
	}
}
