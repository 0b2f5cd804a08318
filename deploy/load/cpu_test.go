package load

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReadCPUSeconds reads the user and system ticks of a stat whose
// command name holds what would throw off a split on spaces.
func TestReadCPUSeconds(t *testing.T) {
	dir := t.TempDir()
	stat := "4242 (kplane (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1000 0 0\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readCPUSeconds(dir)
	if err != nil || got != 3 {
		t.Fatalf("readCPUSeconds = %v, %v; want 3 s (250 + 50 ticks)", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte("4242 (cut) S 1 2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readCPUSeconds(dir); err == nil {
		t.Error("a cut stat read without an error")
	}
}

// TestMeasureCPU: a round's CPU time and context switches per operation
// are what the side's processes spent in it, read from /proc: here a
// helper that spins and sleeps by turns.
func TestMeasureCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc/self/stat: %v", err)
	}
	sample := measureHelper(t, cpuHelperEnv)
	// The helper spins half the time on one core: about 5 ms per
	// operation, less when the machine is busy, never more than 10.
	if sample.CPUMicrosPerOp < 100 || sample.CPUMicrosPerOp > 12000 {
		t.Errorf("CPU per op %.0f µs, want between 100 and 12,000 (a spinning process over a second, 100 ops)", sample.CPUMicrosPerOp)
	}
	// All of it is the one program's, named as its binary is.
	name := filepath.Base(os.Args[0])
	if got := sample.CPUMicrosPerOpByProgram; len(got) != 1 || got[name] != sample.CPUMicrosPerOp {
		t.Errorf("CPU by program %v, want all %.0f µs under %q", got, sample.CPUMicrosPerOp, name)
	}
	// Each sleep stops the helper's thread: hundreds of switches in the
	// second, several per operation.
	if sample.SwitchesPerOp < 1 {
		t.Errorf("%.2f context switches per op, want at least 1 (a process sleeping every other millisecond, 100 ops in a second)", sample.SwitchesPerOp)
	}
	if got := sample.SwitchesPerOpByProgram; len(got) != 1 || got[name] != sample.SwitchesPerOp {
		t.Errorf("context switches by program %v, want all %.2f under %q", got, sample.SwitchesPerOp, name)
	}
	if got := measureCPU(nil, func() Sample { return Sample{Ops: 1} }); got.CPUMicrosPerOp != 0 {
		t.Errorf("a side without processes measured %.0f µs per op", got.CPUMicrosPerOp)
	}
}

// TestMeasureWait: the time a side's threads were ready but waited for a
// CPU is read from each thread's schedstat: here two threads spinning on
// one CPU, each waiting while the other runs, so that over a second of
// 100 ops they wait about 10 ms per op between them.
func TestMeasureWait(t *testing.T) {
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/schedstat"); err != nil {
		t.Skipf("no schedstat: %v", err)
	}
	sample := measureHelper(t, queueHelperEnv)
	// Half of each thread's second, less the time the helper took to
	// start its threads; a busy machine only adds to it.
	if sample.WaitMicrosPerOp < 2000 {
		t.Errorf("waited %.0f µs per op, want at least 2,000 (two threads sharing one CPU for a second, 100 ops)", sample.WaitMicrosPerOp)
	}
	name := filepath.Base(os.Args[0])
	if got := sample.WaitMicrosPerOpByProgram; len(got) != 1 || got[name] != sample.WaitMicrosPerOp {
		t.Errorf("waiting by program %v, want all %.0f µs under %q", got, sample.WaitMicrosPerOp, name)
	}
}

// TestReadWaitSeconds sums the second field of every thread's schedstat,
// in nanoseconds, leaving out one that cannot be read.
func TestReadWaitSeconds(t *testing.T) {
	dir := taskFiles(t, "schedstat", map[string]string{
		"1":  "100 2000000000 5\n",
		"7":  "100 500000000 3\n",
		"12": "cut\n",
	})
	if got := readWaitSeconds(dir); got != 2.5 {
		t.Errorf("readWaitSeconds = %v, want 2.5 (2 s and 0.5 s)", got)
	}
	if got := readWaitSeconds(t.TempDir()); got != 0 {
		t.Errorf("a process without schedstat waited %v s, want 0", got)
	}
}

// measureHelper starts a helper doing what env names and measures it
// through a round of a second that counts 100 operations.
func measureHelper(t *testing.T, env string) Sample {
	t.Helper()
	marker := "helper-" + strings.ReplaceAll(t.Name(), "/", "-")
	startHelper(t, marker, env)
	p, err := newProcesses("A", regexp.QuoteMeta(os.Args[0])+".*"+marker)
	if err != nil {
		t.Fatal(err)
	}
	return measureCPU(p, func() Sample {
		time.Sleep(time.Second)
		return Sample{Ops: 100}
	})
}

// TestProgram names a process's program by its first argument's last
// element, whatever its arguments.
func TestProgram(t *testing.T) {
	for cmdline, want := range map[string]string{
		"/tmp/bin/kplane-core\x00--listen-address=127.0.0.1:7444\x00": "kplane-core",
		"etcd\x00--data-dir\x00/tmp/a b/etcd\x00":                     "etcd",
		"./bin/kplane-up": "kplane-up",
	} {
		if got := program([]byte(cmdline)); got != want {
			t.Errorf("program(%q) = %q, want %q", cmdline, got, want)
		}
	}
}

// TestCPUByProgram: each program's CPU per operation is its median over
// the measured rounds, a round without it counting as zero, and the
// table lists the programs of each side, the most costly first, leaving
// out those under 1% of the side's.
func TestCPUByProgram(t *testing.T) {
	r := &Report{Targets: []TargetInfo{{Name: "A"}, {Name: "B"}}, Rounds: 3}
	for _, s := range []struct {
		side                int
		byProgram, switches map[string]float64
	}{
		{0, map[string]float64{"kplane-core": 300, "kplane-gateway": 100, "kplane-authn": 1}, map[string]float64{"kplane-core": 4, "kplane-gateway": 6}},
		{0, map[string]float64{"kplane-core": 350, "kplane-gateway": 150, "kplane-authn": 1}, map[string]float64{"kplane-core": 5, "kplane-gateway": 5}},
		{0, map[string]float64{"kplane-core": 400, "kplane-authn": 1}, map[string]float64{"kplane-core": 6, "kplane-gateway": 7}},
		{1, map[string]float64{"kube-apiserver": 500, "etcd": 200}, map[string]float64{"kube-apiserver": 4, "etcd": 5}},
		{1, map[string]float64{"kube-apiserver": 600, "etcd": 300}, map[string]float64{"kube-apiserver": 4, "etcd": 5}},
		{1, map[string]float64{"kube-apiserver": 700, "etcd": 250}, map[string]float64{"kube-apiserver": 4, "etcd": 5}},
	} {
		var total, switches float64
		for _, v := range s.byProgram {
			total += v
		}
		for _, v := range s.switches {
			switches += v
		}
		r.add("create", s.side, Sample{Ops: 1, OpsPerSecond: 100, Costs: Costs{CPUMicrosPerOp: total, CPUMicrosPerOpByProgram: s.byProgram, SwitchesPerOp: switches, SwitchesPerOpByProgram: s.switches}})
	}
	r.summarize()
	a, b := r.Workloads[0].Sides[0].CPUMicrosPerOpByProgram, r.Workloads[0].Sides[1].CPUMicrosPerOpByProgram
	if a["kplane-core"] != 350 || a["kplane-gateway"] != 100 || a["kplane-authn"] != 1 || b["kube-apiserver"] != 600 || b["etcd"] != 250 {
		t.Errorf("medians by program: A %v, B %v; want core 350, gateway 100, authn 1; kube-apiserver 600, etcd 250", a, b)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	if sa, sb := r.Workloads[0].Sides[0], r.Workloads[0].Sides[1]; sa.SwitchesPerOp != 10 || sa.SwitchesPerOpByProgram["kplane-gateway"] != 6 || sb.SwitchesPerOp != 9 {
		t.Errorf("context switches: A %v %v, B %v; want medians 10 in all and 6 of the gateway, and 9", sa.SwitchesPerOp, sa.SwitchesPerOpByProgram, sb.SwitchesPerOp)
	}
	for _, want := range []string{
		"A  kplane-core 350, kplane-gateway 100\n", "B  kube-apiserver 600, etcd 250\n",
		"A  10.0  kplane-gateway 6.0, kplane-core 5.0\n", "B  9.0   etcd 5.0, kube-apiserver 4.0\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table without %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "kplane-authn") {
		t.Errorf("table lists a program under 1%% of its side's CPU:\n%s", table)
	}
}

// TestWaitTable: the time waiting for a CPU per operation is each side's
// median over its rounds, in all and by program, in a table of its own
// that a run without it (a kernel without schedstat) leaves out.
func TestWaitTable(t *testing.T) {
	r := &Report{Targets: []TargetInfo{{Name: "A"}, {Name: "B"}}, Rounds: 3}
	for _, s := range []struct {
		side int
		wait map[string]float64
	}{
		{0, map[string]float64{"kplane-core": 200, "kplane-gateway": 100}},
		{0, map[string]float64{"kplane-core": 300, "kplane-gateway": 200}},
		{0, map[string]float64{"kplane-core": 100, "kplane-gateway": 150}},
		{1, map[string]float64{"kube-apiserver": 50}},
		{1, map[string]float64{"kube-apiserver": 70}},
		{1, map[string]float64{"kube-apiserver": 60}},
	} {
		var total float64
		for _, v := range s.wait {
			total += v
		}
		r.add("create", s.side, Sample{Ops: 1, OpsPerSecond: 100, Costs: Costs{CPUMicrosPerOp: 1000, WaitMicrosPerOp: total, WaitMicrosPerOpByProgram: s.wait}})
	}
	r.summarize()
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"waiting for a CPU", "A  300  kplane-core 200, kplane-gateway 150\n", "B  60   kube-apiserver 60\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table without %q:\n%s", want, out.String())
		}
	}
	r = &Report{Targets: []TargetInfo{{Name: "A"}}, Rounds: 1}
	r.add("create", 0, Sample{Ops: 1, OpsPerSecond: 100, Costs: Costs{CPUMicrosPerOp: 1000}})
	r.summarize()
	out.Reset()
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "waiting for a CPU") {
		t.Errorf("a run without waiting times has their table:\n%s", out.String())
	}
}

// TestCPURatio: the report's CPU ratio is B's median CPU per operation
// over A's, and the table shows both sides' and the ratio.
func TestCPURatio(t *testing.T) {
	r := &Report{Targets: []TargetInfo{{Name: "A"}, {Name: "B"}}, Rounds: 3}
	for _, s := range []struct {
		side int
		cpu  float64
	}{{0, 400}, {1, 900}, {0, 500}, {1, 1000}, {0, 600}, {1, 1100}} {
		r.add("create", s.side, Sample{OpsPerSecond: 100, Costs: Costs{CPUMicrosPerOp: s.cpu}})
	}
	r.add("get", 0, Sample{OpsPerSecond: 100})
	r.add("get", 1, Sample{OpsPerSecond: 100})
	r.summarize()
	create, get := r.Workloads[0], r.Workloads[1]
	if create.Sides[0].CPUMicrosPerOp != 500 || create.Sides[1].CPUMicrosPerOp != 1000 || create.CPURatio == nil || *create.CPURatio != 2 {
		t.Errorf("create: A %v, B %v µs/op, ratio %v; want 500, 1000 and 2", create.Sides[0].CPUMicrosPerOp, create.Sides[1].CPUMicrosPerOp, create.CPURatio)
	}
	if get.CPURatio != nil {
		t.Errorf("get, unmeasured: ratio %v, want none", *get.CPURatio)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A cpu us/op", "B/A cpu us/op", "500", "1000", "2.00"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table without %q:\n%s", want, out.String())
		}
	}
}

// TestReadSwitches sums the voluntary and involuntary context switches of
// every thread of a process, leaving out one whose status cannot be read.
func TestReadSwitches(t *testing.T) {
	dir := taskFiles(t, "status", map[string]string{
		"1":  "Name:\tkplane-core\nvoluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t2\n",
		"7":  "Name:\tkplane-core\nvoluntary_ctxt_switches:\t100\nnonvoluntary_ctxt_switches:\t3\n",
		"12": "Name:\tkplane-core\n",
	})
	if got, err := readSwitches(dir); err != nil || got != 115 {
		t.Errorf("readSwitches = %d, %v; want 115 (10+2 and 100+3)", got, err)
	}
	if _, err := readSwitches(t.TempDir()); err == nil {
		t.Error("a process without threads read without an error")
	}
}

// taskFiles makes a process's /proc directory holding, for each thread ID
// of byThread, task/<tid>/<name> with the given content.
func taskFiles(t *testing.T, name string, byThread map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for tid, content := range byThread {
		if err := os.MkdirAll(filepath.Join(dir, "task", tid), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "task", tid, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
