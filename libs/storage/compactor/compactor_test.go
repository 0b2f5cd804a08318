package compactor_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage/compactor"
)

const interval = 50 * time.Millisecond

type record struct {
	compactor.Record
	modRev int64
}

// start runs a compactor until the test ends or stop is called; stop
// returns once Run has.
func start(t *testing.T, client *clientv3.Client) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- compactor.New(client, compactor.WithInterval(interval), compactor.WithSessionTTL(5)).Run(ctx)
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

// records streams every compaction record written.
func records(t *testing.T, client *clientv3.Client) <-chan record {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := make(chan record, 100)
	ch := client.Watch(ctx, compactor.RecordKey(compactor.DefaultPrefix), clientv3.WithRev(1))
	go func() {
		defer close(out)
		for resp := range ch {
			for _, ev := range resp.Events {
				var r record
				if err := json.Unmarshal(ev.Kv.Value, &r.Record); err != nil {
					t.Errorf("decode record: %v", err)
					return
				}
				r.modRev = ev.Kv.ModRevision
				out <- r
			}
		}
	}()
	return out
}

func nextRecord(t *testing.T, ch <-chan record) record {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("record watch ended")
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no compaction within 10s")
	}
	return record{}
}

func TestOneReplicaCompactsAndAnotherTakesOver(t *testing.T) {
	srv := etcdtest.Start(t)
	c1, c2 := srv.Client(t), srv.Client(t)
	ctx := context.Background()
	first, err := c1.Put(ctx, "/data/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Put(ctx, "/data/a", "2"); err != nil {
		t.Fatal(err)
	}
	recs := records(t, c1)

	stopA := start(t, c1)
	leader := nextRecord(t, recs)
	// The first compaction goes to the revision seen an interval before,
	// which is older than the record written with it.
	if leader.Revision >= leader.modRev {
		t.Fatalf("compacted to %d, not older than the record at %d", leader.Revision, leader.modRev)
	}
	start(t, c2)

	prev := leader
	for range 5 {
		r := nextRecord(t, recs)
		if r.Leader != leader.Leader {
			t.Fatalf("replica %s compacted while %s leads", r.Leader, leader.Leader)
		}
		// Each compaction keeps exactly the last interval: it goes to the
		// revision the previous round ended at.
		if r.Revision != prev.modRev {
			t.Fatalf("compacted to %d, want the previous round's revision %d", r.Revision, prev.modRev)
		}
		prev = r
	}
	_, err = c1.Get(ctx, "/data/a", clientv3.WithRev(first.Header.Revision))
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("read at revision %d after compaction: err = %v, want compacted", first.Header.Revision, err)
	}

	stopA()
	for {
		r := nextRecord(t, recs)
		if r.Leader == leader.Leader {
			continue // written before the old leader stopped
		}
		if r.Revision <= prev.Revision {
			t.Fatalf("new leader compacted to %d, behind %d", r.Revision, prev.Revision)
		}
		break
	}
}

// A replica waiting for its turn stops as promptly as the leader.
func TestFollowerStopsWhileCampaigning(t *testing.T) {
	srv := etcdtest.Start(t)
	client := srv.Client(t)
	recs := records(t, client)
	start(t, client)
	nextRecord(t, recs)
	stop := start(t, srv.Client(t))
	stop()
}
