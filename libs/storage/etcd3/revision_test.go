package etcd3

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// readsOnDemand is a revision read that answers when the test says, with
// one more than the last read's revision, and counts its reads.
type readsOnDemand struct {
	started chan struct{}
	answer  chan error
	mu      sync.Mutex
	rev     int64
	reads   int
}

func newReadsOnDemand() *readsOnDemand {
	return &readsOnDemand{started: make(chan struct{}, 10), answer: make(chan error)}
}

func (d *readsOnDemand) read(ctx context.Context) (int64, error) {
	d.started <- struct{}{}
	err := <-d.answer
	if ctx.Err() != nil {
		// As etcd's client fails a call whose context ended.
		return 0, ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reads++
	d.rev++
	return d.rev, err
}

type result struct {
	rev int64
	err error
}

func getAsync(r *revisionReads, ctx context.Context) <-chan result {
	out := make(chan result, 1)
	go func() {
		rev, err := r.get(ctx)
		out <- result{rev, err}
	}()
	return out
}

// waitStarted waits until a read has started.
func (d *readsOnDemand) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-d.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no read started")
	}
}

func TestRevisionReads(t *testing.T) {
	ctx := context.Background()
	t.Run("a caller that arrives during a read gets the next read's revision", func(t *testing.T) {
		d := newReadsOnDemand()
		r := &revisionReads{read: d.read}
		first := getAsync(r, ctx)
		d.waitStarted(t)
		// Arrived after the first read started: a write it saw before
		// calling may be past that read's revision.
		second, third := getAsync(r, ctx), getAsync(r, ctx)
		waitWaiting(t, r, 2)
		d.answer <- nil
		if got := <-first; got.rev != 1 || got.err != nil {
			t.Fatalf("first = %+v, want revision 1", got)
		}
		d.waitStarted(t)
		d.answer <- nil
		for _, c := range []<-chan result{second, third} {
			if got := <-c; got.rev != 2 || got.err != nil {
				t.Fatalf("later caller = %+v, want revision 2 of the read they share", got)
			}
		}
		if d.reads != 2 {
			t.Errorf("%d reads for 3 callers, want 2", d.reads)
		}
	})
	t.Run("callers that find no read in flight start one", func(t *testing.T) {
		d := newReadsOnDemand()
		r := &revisionReads{read: d.read}
		for want := int64(1); want <= 3; want++ {
			c := getAsync(r, ctx)
			d.waitStarted(t)
			d.answer <- nil
			if got := <-c; got.rev != want {
				t.Fatalf("got %+v, want revision %d", got, want)
			}
		}
	})
	t.Run("an error reaches every caller of the read", func(t *testing.T) {
		d := newReadsOnDemand()
		r := &revisionReads{read: d.read}
		first := getAsync(r, ctx)
		d.waitStarted(t)
		boom := errors.New("etcd unreachable")
		d.answer <- boom
		if got := <-first; !errors.Is(got.err, boom) {
			t.Fatalf("got %+v, want %v", got, boom)
		}
	})
	t.Run("a caller that gives up leaves the read to the others", func(t *testing.T) {
		d := newReadsOnDemand()
		r := &revisionReads{read: d.read}
		running := getAsync(r, ctx)
		d.waitStarted(t)
		// Both wait for the next read; the one that gives up asked
		// first, so the read carries its context.
		cctx, cancel := context.WithCancel(ctx)
		quitter := getAsync(r, cctx)
		waitWaiting(t, r, 1)
		other := getAsync(r, ctx)
		waitWaiting(t, r, 2)
		d.answer <- nil
		if got := <-running; got.rev != 1 || got.err != nil {
			t.Fatalf("running = %+v, want revision 1", got)
		}
		d.waitStarted(t)
		cancel()
		if got := <-quitter; !errors.Is(got.err, context.Canceled) {
			t.Fatalf("cancelled caller got %+v", got)
		}
		d.answer <- nil
		if got := <-other; got.rev != 2 || got.err != nil {
			t.Fatalf("other caller = %+v, want revision 2 of the read it shares", got)
		}
	})
}

// waitWaiting waits until n callers wait for the read after the running
// one.
func waitWaiting(t *testing.T, r *revisionReads, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		waiting := r.next != nil && r.next.callers == n
		r.mu.Unlock()
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %d callers wait for the next read", n)
		}
		time.Sleep(time.Millisecond)
	}
}
