package election_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"kplane.dev/libs/election"
	"kplane.dev/libs/etcdtest"
)

// TestMetricsFollowLeadership checks that the leader gauge says which of
// two replicas leads, and moves when the leader resigns.
func TestMetricsFollowLeadership(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	type replica struct {
		reg   *prometheus.Registry
		m     *election.Metrics
		stop  context.CancelFunc
		done  chan error
		lead  chan struct{}
		ended bool
	}
	start := func() *replica {
		r := &replica{reg: prometheus.NewRegistry(), done: make(chan error, 1), lead: make(chan struct{}, 1)}
		var err error
		if r.m, err = election.NewMetrics(r.reg); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.stop = cancel
		go func() {
			r.done <- election.Run(ctx, client, "/test/metrics", func(ctx context.Context, _ election.Term) error {
				r.lead <- struct{}{}
				<-ctx.Done()
				return nil
			}, election.WithMetrics(r.m, "controllers"))
		}()
		t.Cleanup(func() {
			if !r.ended {
				r.stop()
				<-r.done
			}
		})
		return r
	}
	// value is the series of the election "controllers" in family name;
	// -1 when there is none.
	value := func(r *replica, name string) float64 {
		mfs, err := r.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					if m.GetLabel()[0].GetValue() != "controllers" {
						continue
					}
					if m.GetGauge() != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
		return -1
	}
	leader := func(r *replica) float64 { return value(r, "kplane_election_leader") }

	a := start()
	<-a.lead
	b := start()
	eventually(t, "b to report that it campaigns", func() bool { return leader(b) == 0 })
	if got := leader(a); got != 1 {
		t.Fatalf("leader a reports kplane_election_leader %v, want 1", got)
	}
	a.stop()
	if err := <-a.done; err != nil {
		t.Fatal(err)
	}
	a.ended = true
	<-b.lead
	eventually(t, "b to report that it leads", func() bool { return leader(b) == 1 })
	if got := leader(a); got != 0 {
		t.Errorf("a resigned but reports kplane_election_leader %v, want 0", got)
	}
	if got := value(b, "kplane_election_terms_total"); got != 1 {
		t.Errorf("b reports kplane_election_terms_total %v, want 1", got)
	}
}
