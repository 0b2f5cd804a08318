package election_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"kplane.dev/libs/election"
	"kplane.dev/libs/etcdtest"
)

const wait = 20 * time.Second

// candidate runs one replica's campaign and reports its terms.
type candidate struct {
	stop    context.CancelFunc
	done    chan error
	leading atomic.Bool
	terms   atomic.Int32
	once    sync.Once
}

func campaign(t *testing.T, client *clientv3.Client, both *atomic.Int32) *candidate {
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{stop: cancel, done: make(chan error, 1)}
	go func() {
		c.done <- election.Run(ctx, client, "/test/election", func(ctx context.Context, term election.Term) error {
			if both.Add(1) > 1 {
				t.Errorf("two leaders at once")
			}
			// A fenced write succeeds while the term lasts.
			wctx, cancel := context.WithTimeout(context.Background(), wait)
			resp, err := client.Txn(wctx).If(term.Guard).Then(clientv3.OpPut("/test/leader", term.ID)).Commit()
			cancel()
			if err != nil || !resp.Succeeded {
				t.Errorf("fenced write as leader: %v, succeeded %v", err, resp != nil && resp.Succeeded)
			}
			c.terms.Add(1)
			c.leading.Store(true)
			<-ctx.Done()
			c.leading.Store(false)
			both.Add(-1)
			return nil
		}, election.WithTTL(5), election.WithBackoff(10*time.Millisecond))
	}()
	t.Cleanup(func() { c.resign(t) })
	return c
}

// resign stops the campaign and checks that Run returned nil; later calls
// do nothing.
func (c *candidate) resign(t *testing.T) {
	c.once.Do(func() {
		c.stop()
		if err := <-c.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOneLeaderAtATimeAndHandOver(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	var leaders atomic.Int32
	a := campaign(t, client, &leaders)
	eventually(t, "a to lead", a.leading.Load)
	b := campaign(t, client, &leaders)
	// b waits while a leads.
	time.Sleep(100 * time.Millisecond)
	if b.leading.Load() {
		t.Fatal("b leads while a does")
	}
	a.resign(t)
	eventually(t, "b to take over once a resigned", b.leading.Load)
}

func TestLostLeaseEndsTheTerm(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	var leaders atomic.Int32
	a := campaign(t, client, &leaders)
	eventually(t, "a to lead", a.leading.Load)
	leases, err := client.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		if _, err := client.Revoke(context.Background(), l.ID); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a to start a second term after losing its lease", func() bool { return a.terms.Load() >= 2 && a.leading.Load() })
}
