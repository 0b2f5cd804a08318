package backend

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"gopkg.in/natefinch/lumberjack.v2"

	"kplane.dev/services/gateway/internal/audit"
)

// Log writes one JSON event per line, as kube's log backend in format
// json.
type Log struct {
	mu sync.Mutex
	w  io.Writer
	// file is the rotated file; nil for a writer the Log does not own.
	file *lumberjack.Logger
}

var _ audit.Sink = (*Log)(nil)

// LogOption configures a Log.
type LogOption func(*lumberjack.Logger)

// WithMaxAge removes rotated files older than days; 0 keeps them.
func WithMaxAge(days int) LogOption { return func(l *lumberjack.Logger) { l.MaxAge = days } }

// WithMaxBackups keeps at most n rotated files; 0 keeps them all.
func WithMaxBackups(n int) LogOption { return func(l *lumberjack.Logger) { l.MaxBackups = n } }

// WithMaxSize rotates the file when it would grow beyond mb megabytes;
// lumberjack's default is 100.
func WithMaxSize(mb int) LogOption { return func(l *lumberjack.Logger) { l.MaxSize = mb } }

// WithCompress gzips rotated files.
func WithCompress(on bool) LogOption { return func(l *lumberjack.Logger) { l.Compress = on } }

// NewLogFile writes to the file at path, rotating it as opts say. Close
// closes it.
func NewLogFile(path string, opts ...LogOption) *Log {
	l := &lumberjack.Logger{Filename: path}
	for _, o := range opts {
		o(l)
	}
	return &Log{w: l, file: l}
}

// NewLogWriter writes to w, as --audit-log-path=- writes to stdout.
func NewLogWriter(w io.Writer) *Log { return &Log{w: w} }

// Send writes the batch in one write.
func (l *Log) Send(_ context.Context, events []audit.Encoded) error {
	n := 0
	for _, ev := range events {
		n += len(ev.JSON) + 1
	}
	var b bytes.Buffer
	b.Grow(n)
	for _, ev := range events {
		b.Write(ev.JSON)
		b.WriteByte('\n')
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	return nil
}

// Close closes the file, if Log has one.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	if err := l.file.Close(); err != nil {
		return fmt.Errorf("close audit log: %w", err)
	}
	return nil
}
