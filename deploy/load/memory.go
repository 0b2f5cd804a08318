package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// memoryEvery is how often the processes' memory is read during the
// rounds.
const memoryEvery = time.Second

// Memory is what the processes of one side held while the rounds ran:
// each sample sums them, and the medians and peaks are over the samples,
// in MiB. RSS counts the binaries' pages in memory as well as the heap;
// Anon is the heap, stacks and other memory no file backs, which only the
// process can give back; PSS shares pages that several processes map
// between them. A server split into processes maps a binary per process,
// which RSS counts whole in each, so the three tell apart where a
// difference lies.
type Memory struct {
	Target    string `json:"target"`
	Processes int    `json:"processes"`
	Samples   int    `json:"samples"`
	RSS       Stat   `json:"rssMiB"`
	Anon      Stat   `json:"anonMiB"`
	PSS       Stat   `json:"pssMiB"`
}

// Stat is the median and the peak of a side's sampled sums.
type Stat struct {
	Median float64 `json:"median"`
	Peak   float64 `json:"peak"`
}

// usage is one process's memory, or a side's sum, in KiB.
type usage struct {
	rss, anon, pss int64
}

func (u *usage) add(v usage) {
	u.rss += v.rss
	u.anon += v.anon
	u.pss += v.pss
}

// processes finds a server's processes by their command lines.
type processes struct {
	target string
	match  *regexp.Regexp
}

// newProcesses matches the processes whose command line (arguments
// joined by spaces) pattern matches, on Linux, where /proc tells what
// they hold.
func newProcesses(target, pattern string) (*processes, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("processes of %s: %w", target, err)
	}
	return &processes{target: target, match: re}, nil
}

// sample sums the memory of every matching process but this one; a
// process that ends while it is read is left out.
func (p *processes) sample() (usage, int, error) {
	var sum usage
	n, err := p.each(func(dir string, _ []byte) error {
		u, err := readUsage(dir)
		if err == nil {
			sum.add(u)
		}
		return err
	})
	return sum, n, err
}

// cost is what a program's processes have spent since they started: CPU
// time, user and system; context switches, voluntary (a thread waiting:
// on a lock, a socket, a sleep) and not (a thread preempted); and the
// time their threads were ready to run but waited for a CPU, zero where
// the kernel does not keep it.
type cost struct {
	cpuSeconds  float64
	switches    int64
	waitSeconds float64
}

// costs returns what every matching process but this one has spent since
// it started, summed by program: the last element of the process's first
// argument ("kplane-core", "etcd"), so that replicas of one program count
// together.
func (p *processes) costs() (map[string]cost, error) {
	sum := map[string]cost{}
	_, err := p.each(func(dir string, cmdline []byte) error {
		s, err := readCPUSeconds(dir)
		if err != nil {
			return err
		}
		n, err := readSwitches(dir)
		if err != nil {
			return err
		}
		c := sum[program(cmdline)]
		c.cpuSeconds += s
		c.switches += n
		c.waitSeconds += readWaitSeconds(dir)
		sum[program(cmdline)] = c
		return nil
	})
	return sum, err
}

// program names the program of a process from its NUL-separated command
// line.
func program(cmdline []byte) string {
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return filepath.Base(string(argv0))
}

// each calls f with the /proc directory and the command line of every
// matching process but this one and returns how many it read; a process that f fails to read,
// as one that ends meanwhile, is left out.
func (p *processes) each(f func(dir string, cmdline []byte) error) (int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	self := strconv.Itoa(os.Getpid())
	n := 0
	for _, dir := range dirs {
		if filepath.Base(dir) == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		if !p.match.Match(bytes.TrimRight(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), " ")) {
			continue
		}
		if f(dir, cmdline) == nil {
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("no process of %s matches %q", p.target, p.match)
	}
	return n, nil
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: Linux reports
// them in USER_HZ, 100 a second, whatever the kernel's own tick.
const userHZ = 100

// readCPUSeconds reads a process's user and system time, all its threads
// together, from its stat: the 14th and 15th fields, counted after the
// command name, which may hold spaces and parentheses itself.
func readCPUSeconds(dir string) (float64, error) {
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, err
	}
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("%s/stat: no command name", dir)
	}
	// The fields after the name start with the 3rd, the state.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("%s/stat: %d fields", dir, len(fields)+2)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/stat: %w", dir, err)
		}
		ticks += n
	}
	return float64(ticks) / userHZ, nil
}

// readSwitches sums the context switches of a process's threads, from
// each one's status under task/: the process's own status counts its
// first thread only. A thread that ends while they are read is left out;
// one of them must be read.
func readSwitches(dir string) (int64, error) {
	threads, err := filepath.Glob(filepath.Join(dir, "task", "[0-9]*", "status"))
	if err != nil {
		return 0, err
	}
	var sum int64
	read := 0
	for _, status := range threads {
		var voluntary, involuntary int64
		fields := map[string]*int64{"voluntary_ctxt_switches:": &voluntary, "nonvoluntary_ctxt_switches:": &involuntary}
		if err := readFields(status, fields, ""); err != nil {
			continue
		}
		sum += voluntary + involuntary
		read++
	}
	if read == 0 {
		return 0, fmt.Errorf("%s: no thread's context switches read", dir)
	}
	return sum, nil
}

// readWaitSeconds sums the time a process's threads were runnable but
// not running, waiting for a CPU: the second field of each one's
// schedstat under task/, in nanoseconds. It is zero for a kernel built
// without it (CONFIG_SCHED_INFO); a thread that ends while they are read
// is left out.
func readWaitSeconds(dir string) float64 {
	threads, err := filepath.Glob(filepath.Join(dir, "task", "[0-9]*", "schedstat"))
	if err != nil {
		return 0
	}
	var ns int64
	for _, path := range threads {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// "<on CPU ns> <waiting ns> <timeslices>"
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			ns += n
		}
	}
	return float64(ns) / 1e9
}

// readUsage reads a process's resident memory from its status and its
// proportional share from smaps_rollup.
func readUsage(dir string) (usage, error) {
	var u usage
	fields := map[string]*int64{"VmRSS:": &u.rss, "RssAnon:": &u.anon}
	if err := readKiB(filepath.Join(dir, "status"), fields); err != nil {
		return usage{}, err
	}
	if err := readKiB(filepath.Join(dir, "smaps_rollup"), map[string]*int64{"Pss:": &u.pss}); err != nil {
		return usage{}, err
	}
	return u, nil
}

// readKiB reads the "Name: N kB" lines of fields from a /proc file; each
// must be there.
func readKiB(path string, fields map[string]*int64) error {
	return readFields(path, fields, "kB")
}

// readFields reads the "Name: N unit" lines of fields from a /proc file,
// or "Name: N" with no unit; each must be there.
func readFields(path string, fields map[string]*int64, unit string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "Name:", a tab or spaces, the number, the unit.
		f := strings.Fields(sc.Text())
		if unit == "" && len(f) != 2 || unit != "" && (len(f) != 3 || f[2] != unit) {
			continue
		}
		dst, want := fields[f[0]]
		if !want {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, f[0], err)
		}
		*dst = n
		found++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if found != len(fields) {
		return fmt.Errorf("%s: %d of %d fields", path, found, len(fields))
	}
	return nil
}

// memoryWatch samples each side's processes until stopped. Only one
// goroutine samples at a time: watchMemory before it starts the ticker's,
// finish after that one is done.
type memoryWatch struct {
	sides   []*processes
	stop    context.CancelFunc
	done    chan struct{}
	samples [][]usage
	counts  []int
}

// watchMemory starts sampling the sides, once right away: a side whose
// processes are gone fails the run before its rounds.
func watchMemory(ctx context.Context, sides []*processes) (*memoryWatch, error) {
	w := &memoryWatch{sides: sides, done: make(chan struct{}), samples: make([][]usage, len(sides)), counts: make([]int, len(sides))}
	if err := w.sample(); err != nil {
		return nil, err
	}
	ctx, w.stop = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		t := time.NewTicker(memoryEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// A server restarting between two samples misses one;
				// the end of the rounds decides what the run measured.
				_ = w.sample()
			}
		}
	}()
	return w, nil
}

func (w *memoryWatch) sample() error {
	var errs []error
	for i, p := range w.sides {
		u, n, err := p.sample()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w.samples[i] = append(w.samples[i], u)
		w.counts[i] = n
	}
	return errors.Join(errs...)
}

// finish stops sampling, takes a last sample and sums up each side.
func (w *memoryWatch) finish() []Memory {
	w.stop()
	<-w.done
	_ = w.sample()
	out := make([]Memory, len(w.sides))
	for i, p := range w.sides {
		out[i] = summarizeMemory(p.target, w.counts[i], w.samples[i])
	}
	return out
}

// summarizeMemory is the medians and peaks of a side's samples, in MiB.
func summarizeMemory(target string, processes int, samples []usage) Memory {
	m := Memory{Target: target, Processes: processes, Samples: len(samples)}
	for _, pick := range []struct {
		dst *Stat
		get func(usage) int64
	}{
		{&m.RSS, func(u usage) int64 { return u.rss }},
		{&m.Anon, func(u usage) int64 { return u.anon }},
		{&m.PSS, func(u usage) int64 { return u.pss }},
	} {
		values := make([]float64, len(samples))
		for i, s := range samples {
			values[i] = float64(pick.get(s)) / 1024
			pick.dst.Peak = max(pick.dst.Peak, values[i])
		}
		pick.dst.Median = Median(values)
	}
	return m
}
