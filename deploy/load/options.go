package load

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options are kplane-load's flags.
type Options struct {
	// Kubeconfig names side A; CompareKubeconfig, when set, side B.
	Kubeconfig        string
	CompareKubeconfig string
	// Objects ConfigMaps of ObjectSize bytes of data each are created
	// before the first round, and as many custom resources when a cr-
	// workload runs; the lists read all of those in the first namespace.
	Objects    int
	ObjectSize int
	// Namespaces share the objects between them in contiguous blocks, the
	// first holding objects 0 to about Objects/Namespaces.
	Namespaces int
	// PageSize is the limit of each page in the list-paged workload.
	PageSize int
	// Workers run each workload's requests concurrently; Watchers watch
	// the namespace in the watch workload.
	Workers  int
	Watchers int
	// A workload's round ends after Duration, or after Count operations
	// when Count is positive, whichever comes first.
	Duration time.Duration
	Count    int
	Rounds   int
	// Namespace is created for the run and deleted after it, and with
	// Namespaces above one so are Namespace-1 and on; empty picks a fresh
	// name per side.
	Namespace string
	Workloads []string
	// Protobuf asks for protobuf instead of JSON, request and response.
	Protobuf bool
	Output   string
	// Processes and CompareProcesses, when set, match the command lines
	// of the processes that make up side A's and side B's server, whose
	// memory is then sampled through the rounds.
	Processes        string
	CompareProcesses string
}

// NewOptions are the defaults: issue 14's setting of 1,000 ConfigMaps of
// 1 KiB and 16 workers.
func NewOptions() *Options {
	return &Options{
		Objects:    1000,
		ObjectSize: 1024,
		Namespaces: 1,
		PageSize:   100,
		Workers:    16,
		Watchers:   100,
		Duration:   5 * time.Second,
		Rounds:     4,
		Workloads:  WorkloadNames(),
		Output:     "table",
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the server to measure (side A)")
	fs.StringVar(&o.CompareKubeconfig, "compare-kubeconfig", o.CompareKubeconfig, "kubeconfig of a second server (side B), measured in rounds alternating with A's")
	fs.IntVar(&o.Objects, "objects", o.Objects, "ConfigMaps (and custom resources, for the cr- workloads) created before the first round")
	fs.IntVar(&o.ObjectSize, "object-size", o.ObjectSize, "bytes of data in each ConfigMap and custom resource")
	fs.IntVar(&o.Namespaces, "namespaces", o.Namespaces, "namespaces the objects are spread over; the lists read the first, list-all-namespaces all of them")
	fs.IntVar(&o.PageSize, "page-size", o.PageSize, "objects per page in the list-paged workload")
	fs.IntVar(&o.Workers, "workers", o.Workers, "concurrent requests of each workload")
	fs.IntVar(&o.Watchers, "watchers", o.Watchers, "watches open in the watch workload")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "length of one workload's round")
	fs.IntVar(&o.Count, "count", o.Count, "operations in one workload's round, if positive (the round still ends after --duration)")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "rounds on each side")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace to create, fill and delete (must not exist), and with --namespaces N the prefix of the others, <namespace>-1 to <namespace>-<N-1>; empty picks kplane-load-<random>")
	fs.StringSliceVar(&o.Workloads, "workloads", o.Workloads, "workloads to run, of "+strings.Join(WorkloadNames(), ","))
	fs.BoolVar(&o.Protobuf, "protobuf", o.Protobuf, "send and ask for protobuf instead of JSON")
	fs.StringVarP(&o.Output, "output", "o", o.Output, "table or json")
	fs.StringVar(&o.Processes, "processes", o.Processes, "regular expression over command lines (arguments joined by spaces) of the processes that make up side A's server, on this machine: their memory is sampled every second through the rounds and reported (Linux)")
	fs.StringVar(&o.CompareProcesses, "compare-processes", o.CompareProcesses, "the same as --processes for side B")
}

// Validate reports every invalid option.
func (o *Options) Validate() []error {
	var errs []error
	if o.Kubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig is required"))
	}
	for name, v := range map[string]int{"--objects": o.Objects, "--object-size": o.ObjectSize, "--namespaces": o.Namespaces, "--page-size": o.PageSize, "--workers": o.Workers, "--watchers": o.Watchers, "--rounds": o.Rounds} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, not %d", name, v))
		}
	}
	// Update and patch give each worker its own objects so that they never
	// conflict with each other.
	if o.Objects < o.Workers {
		errs = append(errs, fmt.Errorf("--objects (%d) must be at least --workers (%d)", o.Objects, o.Workers))
	}
	// Every namespace holds at least one object, so that every one is
	// written to and listed.
	if o.Objects < o.Namespaces {
		errs = append(errs, fmt.Errorf("--objects (%d) must be at least --namespaces (%d)", o.Objects, o.Namespaces))
	}
	if o.Duration <= 0 {
		errs = append(errs, errors.New("--duration must be positive: it bounds every round"))
	}
	if o.Count < 0 {
		errs = append(errs, fmt.Errorf("--count must not be negative, not %d", o.Count))
	}
	if len(o.Workloads) == 0 {
		errs = append(errs, errors.New("--workloads names none"))
	}
	for _, w := range o.Workloads {
		if !slices.Contains(WorkloadNames(), w) {
			errs = append(errs, fmt.Errorf("unknown workload %q, want one of %s", w, strings.Join(WorkloadNames(), ",")))
		}
	}
	// delete removes what create made earlier in the same round; alone it
	// would find nothing and report no operations.
	for _, pair := range [][2]string{{"delete", "create"}, {"cr-delete", "cr-create"}} {
		if del, create := pair[0], pair[1]; slices.Contains(o.Workloads, del) && !slices.Contains(o.Workloads, create) {
			errs = append(errs, fmt.Errorf("workload %s needs %s: it deletes what %s made in the same round", del, create, create))
		}
	}
	if o.CompareProcesses != "" && o.CompareKubeconfig == "" {
		errs = append(errs, errors.New("--compare-processes needs --compare-kubeconfig: it names side B's processes"))
	}
	if (o.Processes != "" || o.CompareProcesses != "") && runtime.GOOS != "linux" {
		errs = append(errs, fmt.Errorf("--processes reads memory from Linux's /proc, not available on %s", runtime.GOOS))
	}
	for flag, pattern := range map[string]string{"--processes": o.Processes, "--compare-processes": o.CompareProcesses} {
		if _, err := regexp.Compile(pattern); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flag, err))
		}
	}
	if o.Output != "table" && o.Output != "json" {
		errs = append(errs, fmt.Errorf("--output must be table or json, not %q", o.Output))
	}
	return errs
}

// Targets loads the kubeconfigs: A, then B if named.
func (o *Options) Targets() ([]Target, error) {
	paths := []string{o.Kubeconfig}
	if o.CompareKubeconfig != "" {
		paths = append(paths, o.CompareKubeconfig)
	}
	targets := make([]Target, 0, len(paths))
	for i, path := range paths {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %q: %w", path, err)
		}
		targets = append(targets, Target{Name: string(rune('A' + i)), Config: cfg})
	}
	return targets, nil
}

// Target is one server to measure.
type Target struct {
	// Name is the side's name in the report: A or B.
	Name   string
	Config *rest.Config
}
