package options

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/services/gateway/internal/audit"
	"kplane.dev/services/gateway/internal/audit/backend"
	"kplane.dev/services/gateway/internal/audit/policy"
)

// Batch is how one backend's events are buffered and batched.
type Batch struct {
	BufferSize int
	MaxSize    int
	MaxWait    time.Duration
}

func (b *Batch) addFlags(fs *pflag.FlagSet, plugin string) {
	fs.IntVar(&b.BufferSize, "audit-"+plugin+"-batch-buffer-size", b.BufferSize, "how many events wait for the "+plugin+" backend before new ones are dropped (and counted in apiserver_audit_error_total)")
	fs.IntVar(&b.MaxSize, "audit-"+plugin+"-batch-max-size", b.MaxSize, "the most events the "+plugin+" backend sends at once")
	fs.DurationVar(&b.MaxWait, "audit-"+plugin+"-batch-max-wait", b.MaxWait, "how long the "+plugin+" backend waits to fill a batch; 0 sends what is queued at once")
}

func (b *Batch) validate(plugin string) []error {
	var errs []error
	if b.BufferSize <= 0 {
		errs = append(errs, fmt.Errorf("--audit-%s-batch-buffer-size: must be positive, got %d", plugin, b.BufferSize))
	}
	if b.MaxSize <= 0 {
		errs = append(errs, fmt.Errorf("--audit-%s-batch-max-size: must be positive, got %d", plugin, b.MaxSize))
	}
	if b.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("--audit-%s-batch-max-wait: must not be negative, got %v", plugin, b.MaxWait))
	}
	return errs
}

func (b *Batch) backend(name string, sink audit.Sink) audit.Backend {
	return audit.Backend{Name: name, Sink: sink, BufferSize: b.BufferSize, MaxBatchSize: b.MaxSize, MaxBatchWait: b.MaxWait}
}

// Options are the audit flags.
type Options struct {
	PolicyFile string
	// MaxEnqueueWait bounds how long a request waits for room in a full
	// backend buffer.
	MaxEnqueueWait time.Duration

	LogPath       string
	LogFormat     string
	LogMaxAge     int
	LogMaxBackups int
	LogMaxSize    int
	LogCompress   bool
	LogBatch      Batch

	WebhookConfigFile     string
	WebhookInitialBackoff time.Duration
	WebhookBatch          Batch

	Stream         bool
	StreamMaxAge   time.Duration
	StreamMaxBytes int64
	StreamReplicas int
	StreamBatch    Batch
}

// NewOptions returns the defaults: no auditing; kube's webhook batching.
func NewOptions() *Options {
	return &Options{
		LogFormat:             "json",
		LogBatch:              Batch{BufferSize: 10000, MaxSize: 400},
		WebhookInitialBackoff: backend.DefaultInitialBackoff,
		WebhookBatch:          Batch{BufferSize: 10000, MaxSize: 400, MaxWait: 30 * time.Second},
		StreamMaxAge:          backend.DefaultStreamMaxAge,
		StreamMaxBytes:        backend.DefaultStreamMaxBytes,
		StreamReplicas:        1,
		StreamBatch:           Batch{BufferSize: 10000, MaxSize: 400},
	}
}

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PolicyFile, "audit-policy-file", o.PolicyFile, "audit policy (audit.k8s.io/v1 Policy) deciding what is audited; requests are audited only with it and a backend")
	fs.DurationVar(&o.MaxEnqueueWait, "audit-max-enqueue-wait", o.MaxEnqueueWait, "how long a request waits for room in a full audit buffer before its event is dropped and counted; 0 drops at once, as kube's batch mode")
	fs.StringVar(&o.LogPath, "audit-log-path", o.LogPath, `file the log backend writes audit events to, one JSON event a line; "-" is standard output; empty: no log backend`)
	fs.StringVar(&o.LogFormat, "audit-log-format", o.LogFormat, "format of the audit log: json (kube's legacy format is not written)")
	fs.IntVar(&o.LogMaxAge, "audit-log-maxage", o.LogMaxAge, "days a rotated audit log is kept; 0 keeps them")
	fs.IntVar(&o.LogMaxBackups, "audit-log-maxbackup", o.LogMaxBackups, "rotated audit logs kept; 0 keeps them all")
	fs.IntVar(&o.LogMaxSize, "audit-log-maxsize", o.LogMaxSize, "megabytes the audit log grows to before it is rotated; 0 is 100")
	fs.BoolVar(&o.LogCompress, "audit-log-compress", o.LogCompress, "gzip rotated audit logs")
	o.LogBatch.addFlags(fs, "log")
	fs.StringVar(&o.WebhookConfigFile, "audit-webhook-config-file", o.WebhookConfigFile, "kubeconfig naming the audit webhook (cluster) and the gateway's credentials towards it (user); empty: no webhook backend")
	fs.DurationVar(&o.WebhookInitialBackoff, "audit-webhook-initial-backoff", o.WebhookInitialBackoff, "wait before the first retry of a failed webhook request; each further wait is 1.5 times longer, up to 5 attempts")
	o.WebhookBatch.addFlags(fs, "webhook")
	fs.BoolVar(&o.Stream, "audit-stream", o.Stream, "publish audit events to the JetStream stream KPLANE_AUDIT (kplane.audit.events.<stage>) over the gateway's NATS connection")
	fs.DurationVar(&o.StreamMaxAge, "audit-stream-max-age", o.StreamMaxAge, "how long the audit stream keeps an event, when the gateway creates it")
	fs.Int64Var(&o.StreamMaxBytes, "audit-stream-max-bytes", o.StreamMaxBytes, "the most bytes the audit stream holds, when the gateway creates it; the oldest events go first")
	fs.IntVar(&o.StreamReplicas, "audit-stream-replicas", o.StreamReplicas, "replicas of the audit stream, when the gateway creates it")
	o.StreamBatch.addFlags(fs, "stream")
}

// enabled reports whether any backend is on.
func (o *Options) enabled() bool { return o.LogPath != "" || o.WebhookConfigFile != "" || o.Stream }

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	var errs []error
	if o.PolicyFile == "" && o.enabled() {
		errs = append(errs, errors.New("--audit-policy-file is required with an audit backend: without it nothing is audited"))
	}
	if o.PolicyFile != "" && !o.enabled() {
		errs = append(errs, errors.New("--audit-policy-file needs a backend: --audit-log-path, --audit-webhook-config-file or --audit-stream"))
	}
	if o.MaxEnqueueWait < 0 {
		errs = append(errs, fmt.Errorf("--audit-max-enqueue-wait: must not be negative, got %v", o.MaxEnqueueWait))
	}
	if o.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--audit-log-format: only json is written, got %q", o.LogFormat))
	}
	for flag, v := range map[string]int{"--audit-log-maxage": o.LogMaxAge, "--audit-log-maxbackup": o.LogMaxBackups, "--audit-log-maxsize": o.LogMaxSize} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %d", flag, v))
		}
	}
	if o.WebhookInitialBackoff <= 0 {
		errs = append(errs, fmt.Errorf("--audit-webhook-initial-backoff: must be positive, got %v", o.WebhookInitialBackoff))
	}
	if o.StreamMaxAge < 0 || o.StreamMaxBytes <= 0 || o.StreamReplicas <= 0 {
		errs = append(errs, errors.New("--audit-stream-max-age must not be negative, --audit-stream-max-bytes and --audit-stream-replicas must be positive"))
	}
	errs = append(errs, o.LogBatch.validate("log")...)
	errs = append(errs, o.WebhookBatch.validate("webhook")...)
	errs = append(errs, o.StreamBatch.validate("stream")...)
	return errs
}

// Audit is the auditor the options describe and what it owns.
type Audit struct {
	*audit.Auditor
	log *backend.Log
}

// Close sends what is queued, until ctx ends, and closes the log file.
func (a *Audit) Close(ctx context.Context) error {
	err := a.Auditor.Close(ctx)
	if a.log != nil {
		err = errors.Join(err, a.log.Close())
	}
	return err
}

// New builds the auditor of validated options, nil when auditing is
// off: its metrics go on reg, the stream backend publishes over nc, and
// info and longRunning read requests as the gateway's filters do.
func (o *Options) New(nc *nats.Conn, reg prometheus.Registerer, log *slog.Logger,
	info audit.InfoFunc, longRunning func(*requestinfo.Info) bool) (*Audit, error) {
	if o == nil || o.PolicyFile == "" {
		return nil, nil
	}
	p, err := policy.Load(o.PolicyFile)
	if err != nil {
		return nil, err
	}
	a := &Audit{}
	var backends []audit.Backend
	switch o.LogPath {
	case "":
	case "-":
		backends = append(backends, o.LogBatch.backend("log", backend.NewLogWriter(os.Stdout)))
	default:
		a.log = backend.NewLogFile(o.LogPath, backend.WithMaxAge(o.LogMaxAge), backend.WithMaxBackups(o.LogMaxBackups),
			backend.WithMaxSize(o.LogMaxSize), backend.WithCompress(o.LogCompress))
		backends = append(backends, o.LogBatch.backend("log", a.log))
	}
	if o.WebhookConfigFile != "" {
		w, err := backend.NewWebhook(o.WebhookConfigFile, backend.WithInitialBackoff(o.WebhookInitialBackoff))
		if err != nil {
			return nil, err
		}
		backends = append(backends, o.WebhookBatch.backend("webhook", w))
	}
	if o.Stream {
		s, err := backend.NewStream(nc, backend.WithStreamMaxAge(o.StreamMaxAge), backend.WithStreamMaxBytes(o.StreamMaxBytes), backend.WithStreamReplicas(o.StreamReplicas))
		if err != nil {
			return nil, err
		}
		backends = append(backends, o.StreamBatch.backend("stream", s))
	}
	if a.Auditor, err = audit.New(p, backends, reg,
		audit.WithRequestInfo(info), audit.WithLongRunning(longRunning), audit.WithLogger(log), audit.WithEnqueueWait(o.MaxEnqueueWait)); err != nil {
		// The log file is opened at its first write: nothing to close.
		return nil, err
	}
	return a, nil
}
