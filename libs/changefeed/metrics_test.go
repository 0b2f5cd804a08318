package changefeed_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kplane.dev/libs/changefeed"
)

// TestMetricsReportLag checks that the publisher reports the revisions it
// read and published: equal once a change is in the stream, the
// change's revision, and one resync for the empty stream it started on.
func TestMetricsReportLag(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	m, err := changefeed.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f.runPublisher(t, changefeed.WithMetrics(m))
	rv, err := strconv.ParseInt(f.create(t, "a"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// value is the value of the one series of family name, -1 for none.
	value := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				if c := mf.GetMetric()[0].GetCounter(); c != nil {
					return c.GetValue()
				}
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	deadline := time.Now().Add(wait)
	for value("kplane_changefeed_published_revision") != float64(rv) {
		if time.Now().After(deadline) {
			t.Fatalf("kplane_changefeed_published_revision = %v, want %d", value("kplane_changefeed_published_revision"), rv)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := value("kplane_changefeed_watched_revision"); got != float64(rv) {
		t.Errorf("kplane_changefeed_watched_revision = %v, want %d", got, rv)
	}
	if got := value("kplane_changefeed_resyncs_total"); got != 1 {
		t.Errorf("kplane_changefeed_resyncs_total = %v, want 1", got)
	}
}
