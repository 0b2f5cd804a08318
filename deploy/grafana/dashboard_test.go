package grafana_test

import (
	"slices"
	"testing"

	"kplane.dev/deploy/grafana"
)

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		expr string
		want []grafana.Selector
	}{
		{"plain", `up`, []grafana.Selector{{Metric: "up"}}},
		{"job", `go_goroutines{job="kplane-core"}`, []grafana.Selector{{Metric: "go_goroutines", Job: "kplane-core"}}},
		{"job regex names no single job", `go_goroutines{job=~"kplane-.*"}`, []grafana.Selector{{Metric: "go_goroutines"}}},
		{"other matchers around the job", `a_total{code=~"5..", job = 'kplane-gateway' ,verb!="WATCH"}`, []grafana.Selector{{Metric: "a_total", Job: "kplane-gateway"}}},
		{"a brace in a label value", `a{path="/{x}",job="j"}`, []grafana.Selector{{Metric: "a", Job: "j"}}},
		{
			"histogram quantile with grouping and a Grafana range",
			`histogram_quantile(0.99, sum by (le, verb) (rate(x_seconds_bucket{job="g"}[$__rate_interval])))`,
			[]grafana.Selector{{Metric: "x_seconds_bucket", Job: "g"}},
		},
		{
			"binary operation, grouping after the aggregation, offset",
			`sum(rate(a_total[5m] offset 1h)) by (code) / on(instance) group_left(job) b_info and bool c`,
			[]grafana.Selector{{Metric: "a_total"}, {Metric: "b_info"}, {Metric: "c"}},
		},
		{"numbers and durations", `max(x) - 1e3 * 0.5 + y[1h:30s]`, []grafana.Selector{{Metric: "x"}, {Metric: "y"}}},
		{"variables", `rate(x{instance=~"$instance"}[${interval}])`, []grafana.Selector{{Metric: "x"}}},
		{"recording rule name", `job:x:rate5m`, []grafana.Selector{{Metric: "job:x:rate5m"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := grafana.Selectors(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Selectors(%q) = %v, want %v", tc.expr, got, tc.want)
			}
		})
	}
}

func TestSelectorsRefusesBrokenQueries(t *testing.T) {
	for _, expr := range []string{`x{job="a"`, `x{job}`, `rate(x[5m)`, `x{job="a}`} {
		if got, err := grafana.Selectors(expr); err == nil {
			t.Errorf("Selectors(%q) = %v, want an error", expr, got)
		}
	}
}

// TestDashboardReadsMetricsOfItsServices checks that every query parses
// and reads at least one metric, each of one kplane job or of all: a
// query that reads nothing, or a job no service is scraped as, draws an
// empty panel.
func TestDashboardReadsMetricsOfItsServices(t *testing.T) {
	qs, err := grafana.Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	jobs := []string{"", "kplane-gateway", "kplane-authn", "kplane-authz", "kplane-admission", "kplane-core", "kplane-crd"}
	for _, q := range qs {
		sels, err := grafana.Selectors(q.Expr)
		if err != nil {
			t.Errorf("panel %q: %v", q.Panel, err)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("panel %q: query %q reads no metric", q.Panel, q.Expr)
		}
		for _, s := range sels {
			if !slices.Contains(jobs, s.Job) {
				t.Errorf("panel %q: %s of job %q, which is no kplane service", q.Panel, s.Metric, s.Job)
			}
		}
	}
}
