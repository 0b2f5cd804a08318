package load

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain lets the test binary stand in for a server's process: run with
// memoryHelperEnv set, it holds some memory and waits to be killed; with
// cpuHelperEnv, it spins a millisecond and sleeps one, until killed, so
// that it both uses CPU and stops its thread; with queueHelperEnv, two of
// its threads take turns on one CPU.
func TestMain(m *testing.M) {
	if os.Getenv(cpuHelperEnv) != "" {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			for spin := time.Now().Add(time.Millisecond); time.Now().Before(spin); {
			}
			time.Sleep(time.Millisecond)
		}
		os.Exit(0)
	}
	if os.Getenv(queueHelperEnv) != "" {
		queue()
	}
	if os.Getenv(memoryHelperEnv) != "" {
		held := make([]byte, 32<<20)
		for i := range held {
			held[i] = byte(i)
		}
		time.Sleep(time.Minute)
		runtime.KeepAlive(held)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The helpers: one holds 32 MiB, one spins and sleeps by turns, one keeps
// two threads spinning on one CPU.
const (
	memoryHelperEnv = "KPLANE_LOAD_MEMORY_HELPER"
	cpuHelperEnv    = "KPLANE_LOAD_CPU_HELPER"
	queueHelperEnv  = "KPLANE_LOAD_QUEUE_HELPER"
)

// queue spins for a minute on two threads bound to the first CPU this
// process may use, so that each thread, ready all the time, waits for
// the CPU while the other runs.
func queue() {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		os.Exit(2)
	}
	first := 0
	for !set.IsSet(first) {
		first++
	}
	var one unix.CPUSet
	one.Set(first)
	runtime.GOMAXPROCS(2)
	deadline := time.Now().Add(time.Minute)
	spin := func() {
		// Pid 0 is the calling thread, which the goroutine keeps.
		runtime.LockOSThread()
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			os.Exit(2)
		}
		for time.Now().Before(deadline) {
		}
	}
	go spin()
	spin()
	os.Exit(0)
}

// startHelper starts a process of this test binary that does what env
// names, marked by a command-line argument of its own.
func startHelper(t *testing.T, marker, env string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", marker)
	cmd.Env = append(os.Environ(), env+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// TestProcessMemory reads a real process's memory from /proc: the
// process the pattern names, not the one reading.
func TestProcessMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		t.Skipf("no /proc/self/smaps_rollup: %v", err)
	}
	marker := "memory-helper-" + strings.ReplaceAll(t.Name(), "/", "-")
	startHelper(t, marker, memoryHelperEnv)
	// The pattern matches this process too, which must be left out.
	p, err := newProcesses("A", regexp.QuoteMeta(os.Args[0])+".*"+marker+"|"+regexp.QuoteMeta(os.Args[0])+" -test")
	if err != nil {
		t.Fatal(err)
	}
	var u usage
	var n int
	// The helper fills its 32 MiB right after it starts.
	deadline := time.Now().Add(30 * time.Second)
	for {
		u, n, err = p.sample()
		if err == nil && u.anon >= 32<<10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("sample: %v", err)
	}
	if n != 1 {
		t.Errorf("%d processes, want 1: the helper, not the test itself", n)
	}
	if u.anon < 32<<10 || u.anon > u.rss || u.pss <= 0 || u.pss > u.rss {
		t.Errorf("usage %+v KiB: want anon at least the helper's 32 MiB, at most RSS, and 0 < PSS <= RSS", u)
	}

	none, err := newProcesses("B", "^no such process "+marker+"$")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := none.sample(); err == nil || !strings.Contains(err.Error(), "no process of B") {
		t.Errorf("sample of a pattern matching nothing: %v, want an error naming side B", err)
	}
}

func TestSummarizeMemory(t *testing.T) {
	mib := int64(1024)
	samples := []usage{
		{rss: 300 * mib, anon: 100 * mib, pss: 250 * mib},
		{rss: 500 * mib, anon: 300 * mib, pss: 450 * mib},
		{rss: 400 * mib, anon: 200 * mib, pss: 350 * mib},
		{rss: 900 * mib, anon: 700 * mib, pss: 850 * mib},
	}
	got := summarizeMemory("A", 7, samples)
	want := Memory{Target: "A", Processes: 7, Samples: 4,
		RSS: Stat{Median: 450, Peak: 900}, Anon: Stat{Median: 250, Peak: 700}, PSS: Stat{Median: 400, Peak: 850}}
	if got != want {
		t.Errorf("summarizeMemory = %+v, want %+v", got, want)
	}
}

func TestProcessesOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"a pattern that does not compile", func(o *Options) { o.Processes = "kplane-(" }, "--processes: error parsing regexp"},
		{"side B's processes without side B", func(o *Options) { o.CompareProcesses = "kube-apiserver" }, "--compare-processes needs --compare-kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.Kubeconfig = "a.kubeconfig"
			tc.set(o)
			var msgs []string
			for _, err := range o.Validate() {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("Validate() = %q, want an error containing %q", msgs, tc.want)
			}
		})
	}
}
