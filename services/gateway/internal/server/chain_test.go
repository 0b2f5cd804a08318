package server

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"kplane.dev/services/gateway/internal/filters"
)

// TestFilterOrder pins the order requests meet the filters in, kube's
// with the gateway's filters: panic recovery outermost; request info
// before everything that reads it; metrics outside the limits, so their
// answers are counted; authentication before max-in-flight, which lets
// system:masters through; the body limit inside the timeout; and
// authorization last.
func TestFilterOrder(t *testing.T) {
	limits, err := filters.New(filters.DefaultConfig(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range (&Server{limits: limits}).filters() {
		got = append(got, f.name)
	}
	want := []string{"panicrecovery", "requestinfo", "metrics", "endlongrunningonshutdown", "authentication", "impersonation", "maxinflight", "timeout", "bodylimit", "authorization"}
	if !slices.Equal(got, want) {
		t.Errorf("filters %v, want %v", got, want)
	}
}
