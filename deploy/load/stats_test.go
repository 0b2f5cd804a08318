package load

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: Percentile must sort
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of odd count is the middle", ms(3, 1, 2), 50, 2 * time.Millisecond},
		{"p50 of even count is the lower middle", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 99, 99 * time.Millisecond},
		{"p50 of 100 is the 50th", ms(hundred...), 50, 50 * time.Millisecond},
		{"p100 is the maximum", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of 10 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.in, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{4}, 4},
		{"odd count", []float64{9, 1, 5}, 5},
		{"even count averages the middle two", []float64{10, 1, 4, 2}, 3},
		{"an outlier does not move it", []float64{100, 101, 99, 1e9, 0}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			if got := Median(in); got != tc.want {
				t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] {
					t.Fatalf("Median reordered its input: %v, was %v", in, tc.in)
				}
			}
		})
	}
	if got := MedianDuration([]time.Duration{3 * time.Second, time.Second, 2 * time.Second}); got != 2*time.Second {
		t.Errorf("MedianDuration = %v, want 2s", got)
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b, want float64
	}{
		{10, 5, 2},
		{5, 10, 0.5},
		{0, 10, 0},
		{10, 0, 0},
	} {
		if got := Ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("Ratio(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	r := &Report{Targets: []TargetInfo{{Name: "A"}, {Name: "B"}}, Rounds: 3}
	for _, s := range []struct {
		side     int
		ops, p50 float64
		errors   int
	}{
		{0, 300, 5, 0}, {1, 100, 10, 1},
		{0, 100, 1, 0}, {1, 150, 30, 0},
		{0, 200, 3, 0}, {1, 50, 20, 2},
	} {
		r.add("get", s.side, Sample{OpsPerSecond: s.ops, P50Ms: s.p50, Errors: s.errors})
	}
	r.summarize()
	w := r.Workloads[0]
	if a, b := w.Sides[0], w.Sides[1]; a.OpsPerSecond != 200 || a.P50Ms != 3 || b.OpsPerSecond != 100 || b.P50Ms != 20 {
		t.Errorf("medians A %v ops/s p50 %v, B %v ops/s p50 %v; want A 200, 3 and B 100, 20", a.OpsPerSecond, a.P50Ms, b.OpsPerSecond, b.P50Ms)
	}
	if w.Sides[1].Errors != 3 || r.Errors() != 3 {
		t.Errorf("B errors %d, report errors %d; want 3 and 3", w.Sides[1].Errors, r.Errors())
	}
	if w.Ratio == nil || *w.Ratio != 2 {
		t.Errorf("ratio %v, want 2", w.Ratio)
	}
	// Round by round: 300/100, 100/150, 200/50.
	if w.RatioRange == nil || math.Abs(w.RatioRange[0]-2.0/3) > 1e-9 || w.RatioRange[1] != 4 {
		t.Errorf("ratio range %v, want [0.667 4]", w.RatioRange)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"by round", "2.00  0.67-4.00"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table without %q:\n%s", want, out.String())
		}
	}
}

// TestRatioRangeNeedsBothSides: a workload that one side did not run in
// some round is ranged over the rounds both ran, and without any such
// round has no range.
func TestRatioRangeNeedsBothSides(t *testing.T) {
	r := &Report{Targets: []TargetInfo{{Name: "A"}, {Name: "B"}}, Rounds: 2}
	r.add("get", 0, Sample{OpsPerSecond: 100})
	r.add("get", 0, Sample{OpsPerSecond: 300})
	r.add("get", 1, Sample{OpsPerSecond: 50})
	r.add("list", 0, Sample{OpsPerSecond: 10})
	r.summarize()
	if got := r.Workloads[0].RatioRange; got == nil || *got != [2]float64{2, 2} {
		t.Errorf("get: range %v, want [2 2] (the one round both ran)", got)
	}
	if got := r.Workloads[1].RatioRange; got != nil {
		t.Errorf("list, run by A alone: range %v, want none", *got)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Options)
		errs   int
	}{
		{"defaults with a kubeconfig", func(*Options) {}, 0},
		{"no kubeconfig", func(o *Options) { o.Kubeconfig = "" }, 1},
		{"unbounded round", func(o *Options) { o.Duration = 0 }, 1},
		{"fewer objects than workers", func(o *Options) { o.Objects = 4 }, 1},
		{"unknown workload", func(o *Options) { o.Workloads = []string{"get", "exec"} }, 1},
		{"unknown output", func(o *Options) { o.Output = "yaml" }, 1},
		{"no page size", func(o *Options) { o.PageSize = 0 }, 1},
		{"the cr- workloads and the list across namespaces", func(o *Options) {
			o.Workloads = []string{"list-all-namespaces", "cr-get", "cr-update", "cr-list", "cr-create", "cr-delete"}
		}, 0},
		{"as many namespaces as objects", func(o *Options) { o.Objects, o.Namespaces = 20, 20 }, 0},
		{"no namespace", func(o *Options) { o.Namespaces = 0 }, 1},
		{"delete without create", func(o *Options) { o.Workloads = []string{"get", "delete"} }, 1},
		{"cr-delete without cr-create", func(o *Options) { o.Workloads = []string{"create", "delete", "cr-delete"} }, 1},
		{"deletes with their creates", func(o *Options) { o.Workloads = []string{"delete", "create", "cr-create", "cr-delete"} }, 0},
		{"more namespaces than objects", func(o *Options) { o.Objects, o.Namespaces = 20, 21 }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.Kubeconfig = "kubeconfig"
			tc.change(o)
			if errs := o.Validate(); len(errs) != tc.errs {
				t.Errorf("Validate() = %v, want %d errors", errs, tc.errs)
			}
		})
	}
}

func TestRoundOrder(t *testing.T) {
	for _, tc := range []struct {
		sides, round int
		want         []int
	}{
		{1, 0, []int{0}},
		{1, 1, []int{0}},
		{2, 0, []int{0, 1}},
		{2, 1, []int{1, 0}},
		{2, 2, []int{0, 1}},
	} {
		if got := roundOrder(tc.sides, tc.round); !slices.Equal(got, tc.want) {
			t.Errorf("roundOrder(%d, %d) = %v, want %v", tc.sides, tc.round, got, tc.want)
		}
	}
}
