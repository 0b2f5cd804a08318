package server

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"kplane.dev/services/gateway/internal/filters"
)

// TestFilterOrder pins the order requests meet the filters in: the
// audit ID outermost, so that every answer carries it; the access log
// next, to log a recovered panic's 500; panic recovery next; request
// info before everything that reads it;
// metrics outside the limits, so their answers are counted; the timeout
// (and the body's read deadline) around everything that may wait;
// authentication, the audit of the authenticated user's request,
// impersonation and authorization before any limit is
// taken or any body byte read, so that a refused request holds nothing;
// the limits after them, so that system:masters gets through; the body
// limit last, next to the proxy it streams to.
func TestFilterOrder(t *testing.T) {
	limits, err := filters.New(filters.DefaultConfig(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range (&Server{limits: limits}).filters() {
		got = append(got, f.name)
	}
	want := []string{"auditid", "accesslog", "panicrecovery", "requestinfo", "tracing", "metrics", "endlongrunningonshutdown", "timeout",
		"authentication", "audit", "impersonation", "authorization", "maxinflight", "longrunningperuser", "bodylimit"}
	if !slices.Equal(got, want) {
		t.Errorf("filters %v, want %v", got, want)
	}
}
