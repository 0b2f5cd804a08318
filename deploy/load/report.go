package load

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// recorder collects one goroutine's latencies of successful operations
// and its failures.
type recorder struct {
	latencies []time.Duration
	errors    int
	firstErr  error
}

func (r *recorder) record(latency time.Duration, err error) {
	if err != nil {
		r.errors++
		if r.firstErr == nil {
			r.firstErr = err
		}
		return
	}
	r.latencies = append(r.latencies, latency)
}

// merge sums the recorders of one round that took elapsed.
func merge(recs []recorder, elapsed time.Duration) Sample {
	var all []time.Duration
	s := Sample{Seconds: elapsed.Seconds()}
	for _, r := range recs {
		all = append(all, r.latencies...)
		s.Errors += r.errors
		if s.FirstError == "" && r.firstErr != nil {
			s.FirstError = r.firstErr.Error()
		}
	}
	s.Ops = len(all)
	if elapsed > 0 {
		s.OpsPerSecond = float64(s.Ops) / elapsed.Seconds()
	}
	s.P50Ms = ms(Percentile(all, 50))
	s.P99Ms = ms(Percentile(all, 99))
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Sample is one round of one workload on one side. Ops counts successful
// operations only (for watch: deliveries), and latencies are theirs.
type Sample struct {
	Ops          int     `json:"ops"`
	Errors       int     `json:"errors"`
	FirstError   string  `json:"firstError,omitempty"`
	Seconds      float64 `json:"seconds"`
	OpsPerSecond float64 `json:"opsPerSecond"`
	P50Ms        float64 `json:"p50Ms"`
	P99Ms        float64 `json:"p99Ms"`
	// Costs are the round's, when the side's processes were named
	// (--processes).
	Costs
}

// Costs are what a side's processes spent per operation: in a Sample
// over the round, in a Side the medians over its rounds. Each ByProgram
// splits its total by program, which tells which process of a server a
// difference lies in.
type Costs struct {
	// CPUMicrosPerOp is the CPU time the side's processes used per operation.
	CPUMicrosPerOp          float64            `json:"cpuMicrosPerOp,omitempty"`
	CPUMicrosPerOpByProgram map[string]float64 `json:"cpuMicrosPerOpByProgram,omitempty"`
	// SwitchesPerOp is the context switches of the side's processes per
	// operation, measured with the CPU time: each is a thread that
	// stopped, to wait or preempted, and another that ran in its place,
	// which a request pays at every hop between processes.
	SwitchesPerOp          float64            `json:"contextSwitchesPerOp,omitempty"`
	SwitchesPerOpByProgram map[string]float64 `json:"contextSwitchesPerOpByProgram,omitempty"`
	// WaitMicrosPerOp is the time per operation the side's threads were
	// ready to run but waited for a CPU: on a machine with fewer CPUs
	// than busy threads, the part of a request's latency that is queueing
	// for a CPU rather than work.
	WaitMicrosPerOp          float64            `json:"cpuWaitMicrosPerOp,omitempty"`
	WaitMicrosPerOpByProgram map[string]float64 `json:"cpuWaitMicrosPerOpByProgram,omitempty"`
}

// Side is one side's results of a workload: medians over its rounds.
type Side struct {
	Target       string  `json:"target"`
	OpsPerSecond float64 `json:"opsPerSecond"`
	P50Ms        float64 `json:"p50Ms"`
	P99Ms        float64 `json:"p99Ms"`
	Costs
	Errors     int      `json:"errors"`
	FirstError string   `json:"firstError,omitempty"`
	Rounds     []Sample `json:"rounds"`
}

// Workload is a workload's results on every side; Ratio is A's median
// throughput over B's, present with two sides. CPURatio is B's median CPU
// time per operation over A's, present when both sides' processes were
// named: above 1, as for Ratio, is A doing better, here by spending less.
//
// RatioRange is the lowest and the highest of the rounds' own throughput
// ratios, A's round i over B's round i, which ran back to back: how far
// the machine moved a ratio between rounds. A Ratio whose range spans 1
// is not told apart from parity by this run.
type Workload struct {
	Name       string      `json:"name"`
	Sides      []Side      `json:"sides"`
	Ratio      *float64    `json:"ratio,omitempty"`
	RatioRange *[2]float64 `json:"ratioRange,omitempty"`
	CPURatio   *float64    `json:"cpuRatio,omitempty"`
}

// TargetInfo says which server a side is.
type TargetInfo struct {
	Name string `json:"name"`
	Host string `json:"host"`
}

// Report is a run's results.
type Report struct {
	Targets    []TargetInfo `json:"targets"`
	Objects    int          `json:"objects"`
	ObjectSize int          `json:"objectSize"`
	Namespaces int          `json:"namespaces"`
	Workers    int          `json:"workers"`
	Watchers   int          `json:"watchers"`
	Rounds     int          `json:"rounds"`
	Protobuf   bool         `json:"protobuf"`
	Workloads  []Workload   `json:"workloads"`
	// Memory is each side's, for the sides whose processes were named.
	Memory []Memory `json:"memory,omitempty"`
}

func newReport(o *Options, targets []Target) *Report {
	r := &Report{Objects: o.Objects, ObjectSize: o.ObjectSize, Namespaces: o.Namespaces, Workers: o.Workers, Watchers: o.Watchers, Rounds: o.Rounds, Protobuf: o.Protobuf}
	for _, t := range targets {
		r.Targets = append(r.Targets, TargetInfo{Name: t.Name, Host: t.Config.Host})
	}
	return r
}

// add files a round's sample of workload name on side i.
func (r *Report) add(name string, i int, s Sample) {
	var w *Workload
	for j := range r.Workloads {
		if r.Workloads[j].Name == name {
			w = &r.Workloads[j]
		}
	}
	if w == nil {
		r.Workloads = append(r.Workloads, Workload{Name: name, Sides: make([]Side, len(r.Targets))})
		w = &r.Workloads[len(r.Workloads)-1]
		for j, t := range r.Targets {
			w.Sides[j].Target = t.Name
		}
	}
	w.Sides[i].Rounds = append(w.Sides[i].Rounds, s)
}

// summarize takes the medians over rounds and the ratios.
func (r *Report) summarize() {
	for wi := range r.Workloads {
		w := &r.Workloads[wi]
		for si := range w.Sides {
			side := &w.Sides[si]
			var ops, p50, p99 []float64
			for _, s := range side.Rounds {
				ops = append(ops, s.OpsPerSecond)
				p50 = append(p50, s.P50Ms)
				p99 = append(p99, s.P99Ms)
				side.Errors += s.Errors
				if side.FirstError == "" {
					side.FirstError = s.FirstError
				}
			}
			side.OpsPerSecond, side.P50Ms, side.P99Ms = Median(ops), Median(p50), Median(p99)
			side.Costs = medianCosts(side.Rounds)
		}
		if len(w.Sides) == 2 {
			ratio := Ratio(w.Sides[0].OpsPerSecond, w.Sides[1].OpsPerSecond)
			w.Ratio = &ratio
			w.RatioRange = roundRatios(w.Sides[0].Rounds, w.Sides[1].Rounds)
			if a, b := w.Sides[0].CPUMicrosPerOp, w.Sides[1].CPUMicrosPerOp; a > 0 && b > 0 {
				cpu := Ratio(b, a)
				w.CPURatio = &cpu
			}
		}
	}
}

// roundRatios is the lowest and highest throughput ratio of a's rounds
// over b's, round by round, or nil without a round on both sides.
func roundRatios(a, b []Sample) *[2]float64 {
	var r *[2]float64
	for i := range min(len(a), len(b)) {
		v := Ratio(a[i].OpsPerSecond, b[i].OpsPerSecond)
		if r == nil {
			r = &[2]float64{v, v}
		}
		r[0], r[1] = min(r[0], v), max(r[1], v)
	}
	return r
}

// medianCosts is each cost's median over the rounds whose CPU was
// measured, in all and by program; none without such a round.
func medianCosts(rounds []Sample) Costs {
	var cpu, switches, wait []float64
	for _, s := range rounds {
		if s.CPUMicrosPerOp > 0 {
			cpu = append(cpu, s.CPUMicrosPerOp)
			switches = append(switches, s.SwitchesPerOp)
			wait = append(wait, s.WaitMicrosPerOp)
		}
	}
	if len(cpu) == 0 {
		return Costs{}
	}
	c := Costs{
		CPUMicrosPerOp:          Median(cpu),
		CPUMicrosPerOpByProgram: medianByProgram(rounds, func(s Sample) map[string]float64 { return s.CPUMicrosPerOpByProgram }),
		SwitchesPerOp:           Median(switches),
		SwitchesPerOpByProgram:  medianByProgram(rounds, func(s Sample) map[string]float64 { return s.SwitchesPerOpByProgram }),
		WaitMicrosPerOp:         Median(wait),
	}
	if c.WaitMicrosPerOp > 0 {
		c.WaitMicrosPerOpByProgram = medianByProgram(rounds, func(s Sample) map[string]float64 { return s.WaitMicrosPerOpByProgram })
	}
	return c
}

// medianByProgram is each program's median of what byProgram picks of a
// round (CPU time or context switches per operation) over the rounds
// whose CPU was measured; a round in which a program spent none counts as
// zero for it.
func medianByProgram(rounds []Sample, byProgram func(Sample) map[string]float64) map[string]float64 {
	var measured []Sample
	names := map[string]bool{}
	for _, s := range rounds {
		if s.CPUMicrosPerOp > 0 {
			measured = append(measured, s)
			for name := range byProgram(s) {
				names[name] = true
			}
		}
	}
	out := make(map[string]float64, len(names))
	for name := range names {
		values := make([]float64, len(measured))
		for i, s := range measured {
			values[i] = byProgram(s)[name]
		}
		out[name] = Median(values)
	}
	return out
}

// Errors is the number of failed operations over all workloads and sides.
func (r *Report) Errors() int {
	n := 0
	for _, w := range r.Workloads {
		for _, s := range w.Sides {
			n += s.Errors
		}
	}
	return n
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the medians as a table, one row per workload, then
// the first error of each side and workload that had any.
func (r *Report) WriteTable(out io.Writer) error {
	for _, t := range r.Targets {
		fmt.Fprintf(out, "%s: %s\n", t.Name, t.Host)
	}
	encoding := "JSON"
	if r.Protobuf {
		encoding = "protobuf"
	}
	spread := ""
	if r.Namespaces > 1 {
		spread = fmt.Sprintf(" in %d namespaces", r.Namespaces)
	}
	fmt.Fprintf(out, "%d ConfigMaps of %d B%s, %d workers, %d watchers, %s, medians of %d rounds\n",
		r.Objects, r.ObjectSize, spread, r.Workers, r.Watchers, encoding, r.Rounds)
	if len(r.Targets) == 2 {
		fmt.Fprintln(out, "by round: the lowest and highest of A's round i over B's round i; a range spanning 1.00 is parity within this run's noise")
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "workload\t")
	cpu := r.cpuMeasured()
	for _, t := range r.Targets {
		fmt.Fprintf(tw, "%[1]s ops/s\t%[1]s p50 ms\t%[1]s p99 ms\t%[1]s errors\t", t.Name)
		if cpu {
			fmt.Fprintf(tw, "%s cpu us/op\t", t.Name)
		}
	}
	if len(r.Targets) == 2 {
		fmt.Fprint(tw, "A/B ops/s\tby round\t")
		if cpu {
			fmt.Fprint(tw, "B/A cpu us/op\t")
		}
	}
	fmt.Fprintln(tw)
	for _, w := range r.Workloads {
		fmt.Fprintf(tw, "%s\t", w.Name)
		for _, s := range w.Sides {
			fmt.Fprintf(tw, "%.0f\t%.1f\t%.1f\t%d\t", s.OpsPerSecond, s.P50Ms, s.P99Ms, s.Errors)
			if cpu {
				fmt.Fprintf(tw, "%s\t", orDash(s.CPUMicrosPerOp, "%.0f"))
			}
		}
		if w.Ratio != nil {
			fmt.Fprintf(tw, "%.2f\t", *w.Ratio)
			if w.RatioRange != nil {
				fmt.Fprintf(tw, "%.2f-%.2f\t", w.RatioRange[0], w.RatioRange[1])
			} else {
				fmt.Fprint(tw, "-\t")
			}
			if cpu {
				ratio := 0.0
				if w.CPURatio != nil {
					ratio = *w.CPURatio
				}
				fmt.Fprintf(tw, "%s\t", orDash(ratio, "%.2f"))
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeCPUByProgram(out); err != nil {
		return err
	}
	if err := r.writeMemory(out); err != nil {
		return err
	}
	for _, w := range r.Workloads {
		for _, s := range w.Sides {
			if s.FirstError != "" {
				fmt.Fprintf(out, "%s %s: %d errors, first: %s\n", s.Target, w.Name, s.Errors, s.FirstError)
			}
		}
	}
	return nil
}

// cpuMeasured reports whether any side measured its CPU time.
func (r *Report) cpuMeasured() bool {
	return r.measured(func(s Side) float64 { return s.CPUMicrosPerOp })
}

// measured tells whether cost is above zero on any workload's side.
func (r *Report) measured(cost func(Side) float64) bool {
	for _, w := range r.Workloads {
		for _, s := range w.Sides {
			if cost(s) > 0 {
				return true
			}
		}
	}
	return false
}

// orDash formats v, or "-" when it was not measured.
func orDash(v float64, format string) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// byProgramShare is the share of a side's CPU time (or context switches)
// per operation below which a program is left out of the by-program
// tables (JSON has every program).
const byProgramShare = 0.01

// writeCPUByProgram writes, for each workload and side whose CPU was
// measured, the median CPU time per operation of each program, then the
// median context switches and time waiting for a CPU per operation, in
// all and of each program, the most costly first.
func (r *Report) writeCPUByProgram(out io.Writer) error {
	if !r.cpuMeasured() {
		return nil
	}
	fmt.Fprintf(out, "\ncpu us/op by program, medians of rounds (programs under %.0f%% of their side's left out)\n\n", byProgramShare*100)
	if err := r.writeByProgram(out, "%.0f", func(s Side) (float64, map[string]float64) { return 0, s.CPUMicrosPerOpByProgram }); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ncontext switches per op, all and by program, medians of rounds (programs under %.0f%% of their side's left out)\n\n", byProgramShare*100)
	if err := r.writeByProgram(out, "%.1f", func(s Side) (float64, map[string]float64) { return s.SwitchesPerOp, s.SwitchesPerOpByProgram }); err != nil {
		return err
	}
	if !r.measured(func(s Side) float64 { return s.WaitMicrosPerOp }) {
		return nil
	}
	fmt.Fprintf(out, "\nus/op ready to run but waiting for a CPU, all and by program, medians of rounds (programs under %.0f%% of their side's left out)\n\n", byProgramShare*100)
	return r.writeByProgram(out, "%.0f", func(s Side) (float64, map[string]float64) { return s.WaitMicrosPerOp, s.WaitMicrosPerOpByProgram })
}

// writeByProgram writes a line per workload and side that pick finds
// programs in: the side's total when pick gives one above zero, then
// each program's value, the largest first.
func (r *Report) writeByProgram(out io.Writer, format string, pick func(Side) (float64, map[string]float64)) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, w := range r.Workloads {
		for _, s := range w.Sides {
			all, byProgram := pick(s)
			if len(byProgram) == 0 {
				continue
			}
			names := slices.Collect(maps.Keys(byProgram))
			slices.SortFunc(names, func(a, b string) int {
				return cmp.Or(cmp.Compare(byProgram[b], byProgram[a]), cmp.Compare(a, b))
			})
			var parts []string
			var total float64
			for _, n := range names {
				total += byProgram[n]
			}
			for _, n := range names {
				if v := byProgram[n]; v >= byProgramShare*total {
					parts = append(parts, fmt.Sprintf("%s "+format, n, v))
				}
			}
			if all > 0 {
				fmt.Fprintf(tw, "%s\t%s\t"+format+"\t%s\n", w.Name, s.Target, all, strings.Join(parts, ", "))
			} else {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", w.Name, s.Target, strings.Join(parts, ", "))
			}
		}
	}
	return tw.Flush()
}

// writeMemory writes the memory table: a row per side, then A/B when both
// sides were sampled, where below 1 is A holding less.
func (r *Report) writeMemory(out io.Writer) error {
	if len(r.Memory) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nmemory in MiB, summed over each side's processes every %s through the rounds\n\n", memoryEvery)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "side\tprocesses\tsamples\tRSS median\tRSS peak\tanon median\tanon peak\tPSS median\tPSS peak\t")
	for _, m := range r.Memory {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", m.Target, m.Processes, m.Samples,
			m.RSS.Median, m.RSS.Peak, m.Anon.Median, m.Anon.Peak, m.PSS.Median, m.PSS.Peak)
	}
	if len(r.Memory) == 2 {
		a, b := r.Memory[0], r.Memory[1]
		fmt.Fprintf(tw, "A/B\t\t\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n",
			Ratio(a.RSS.Median, b.RSS.Median), Ratio(a.RSS.Peak, b.RSS.Peak), Ratio(a.Anon.Median, b.Anon.Median),
			Ratio(a.Anon.Peak, b.Anon.Peak), Ratio(a.PSS.Median, b.PSS.Median), Ratio(a.PSS.Peak, b.PSS.Peak))
	}
	return tw.Flush()
}
