package changefeed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kplane.dev/libs/changefeed"
	"kplane.dev/libs/election"
	proto "kplane.dev/proto/changefeed"
)

func rv(n int64) string { return strconv.FormatInt(n, 10) }

// hasEvent reports whether events hold one of type typ about name.
func hasEvent(typ proto.EventType, name string) func([]proto.Event) bool {
	return func(events []proto.Event) bool {
		for _, e := range events {
			if e.Type == typ && e.Name == name {
				return true
			}
		}
		return false
	}
}

func TestPublishesEveryChangeInCommitOrder(t *testing.T) {
	f := newFixture(t)
	rvPre := f.create(t, "pre")
	start := f.revision(t)
	f.runPublisher(t)
	all := f.subscribe(t, proto.StreamSubjects, 0)
	configMaps := f.subscribe(t, proto.Subject("", "v1", "configmaps"), 0)
	secrets := f.subscribe(t, proto.Subject("", "v1", "secrets"), 0)
	all.waitForName(t, "pre")

	rvA := f.create(t, "a")
	rvB := f.create(t, "b")
	rvA2 := f.update(t, "a", "v1")
	f.delete(t, "b")
	rvDel := rv(f.revision(t))
	// One transaction, two keys: one revision, two changes.
	ctx := context.Background()
	txn, err := f.etcd.Txn(ctx).Then(
		clientv3.OpPut(f.keys.Object("ns", "x"), `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ns"}}`),
		clientv3.OpPut(f.keys.Object("ns", "y"), `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y","namespace":"ns"}}`),
	).Commit()
	if err != nil {
		t.Fatalf("write x and y: %v", err)
	}
	rvXY := rv(txn.Header.Revision)

	want := []brief{
		{proto.Resync, "", rv(start)},
		{proto.Added, "pre", rvPre},
		{proto.Added, "a", rvA},
		{proto.Added, "b", rvB},
		{proto.Modified, "a", rvA2},
		{proto.Deleted, "b", rvDel},
		{proto.Added, "x", rvXY},
		{proto.Added, "y", rvXY},
	}
	got := all.waitForName(t, "y")
	if diff := cmp.Diff(want, summary(got)); diff != "" {
		t.Errorf("events on %s (-want +got):\n%s", proto.StreamSubjects, diff)
	}
	if diff := cmp.Diff(want, summary(configMaps.waitForName(t, "y"))); diff != "" {
		t.Errorf("events on the configmaps subject (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[:1], summary(secrets.waitUntil(t, "the resync marker", func(e []proto.Event) bool { return len(e) > 0 }))); diff != "" {
		t.Errorf("events on the secrets subject (-want +got):\n%s", diff)
	}

	t.Run("payload", func(t *testing.T) {
		for _, e := range got[1:] {
			if e.Group != "" || e.Version != "v1" || e.Resource != "configmaps" || e.Kind != "ConfigMap" || e.Namespace != "ns" {
				t.Errorf("%s %s: group/version/resource/kind/namespace = %q/%q/%q/%q/%q, want \"\"/v1/configmaps/ConfigMap/ns",
					e.Type, e.Name, e.Group, e.Version, e.Resource, e.Kind, e.Namespace)
			}
			var obj struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name            string `json:"name"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
				Data map[string]string `json:"data"`
			}
			if err := json.Unmarshal(e.Object, &obj); err != nil {
				t.Fatalf("%s %s: decode object: %v", e.Type, e.Name, err)
			}
			if obj.APIVersion != "v1" || obj.Kind != "ConfigMap" || obj.Metadata.Name != e.Name || obj.Metadata.ResourceVersion != e.ResourceVersion {
				t.Errorf("%s %s: object is %s %s %q at resourceVersion %q, want v1 ConfigMap %q at %q",
					e.Type, e.Name, obj.APIVersion, obj.Kind, obj.Metadata.Name, obj.Metadata.ResourceVersion, e.Name, e.ResourceVersion)
			}
			if e.Type == proto.Modified && obj.Data["k"] != "v1" {
				t.Errorf("MODIFIED a: data %v, want the updated k=v1", obj.Data)
			}
			if e.Type == proto.Deleted && obj.Data["k"] != "v0" {
				t.Errorf("DELETED b: data %v, want the last state k=v0", obj.Data)
			}
		}
	})
}

func TestSubscribeFromAListResourceVersion(t *testing.T) {
	f := newFixture(t)
	f.runPublisher(t)
	rvs := []string{rv(f.revision(t))}
	var names []string
	for i := range 5 {
		name := fmt.Sprintf("cm-%d", i)
		names = append(names, name)
		rvs = append(rvs, f.create(t, name))
	}
	f.subscribe(t, proto.StreamSubjects, 0).waitForName(t, "cm-4")

	tests := []struct {
		name  string
		after int // how many of the writes the list saw
	}{
		{"before every write", 0},
		{"in the middle", 2},
		{"after the last published write", 5},
	}
	collectors := make([]*collector, len(tests))
	for i, tt := range tests {
		from, err := strconv.ParseInt(rvs[tt.after], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		collectors[i] = f.subscribe(t, proto.StreamSubjects, from)
	}
	rvLast := f.create(t, "last")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []brief
			for j := tt.after; j < len(names); j++ {
				want = append(want, brief{proto.Added, names[j], rvs[j+1]})
			}
			want = append(want, brief{proto.Added, "last", rvLast})
			if diff := cmp.Diff(want, summary(collectors[i].waitForName(t, "last"))); diff != "" {
				t.Errorf("events after resourceVersion %s (-want +got):\n%s", rvs[tt.after], diff)
			}
		})
	}
}

// leader runs a publisher under election and says whether it leads.
type leader struct {
	stop    func()
	leading atomic.Bool
	terms   atomic.Int32
}

func (f *fixture) campaign(t *testing.T) *leader {
	l := &leader{}
	p := changefeed.NewPublisher(f.etcd, f.js, prefix, changefeed.WithRetryInterval(10*time.Millisecond))
	l.stop = runUntilStopped(t, func(ctx context.Context) error {
		return election.Run(ctx, f.etcd, "/test/changefeed", func(ctx context.Context, _ election.Term) error {
			l.terms.Add(1)
			l.leading.Store(true)
			defer l.leading.Store(false)
			return p.Run(ctx)
		}, election.WithTTL(5), election.WithBackoff(10*time.Millisecond))
	})
	return l
}

func TestFailoverLosesAndRepeatsNothing(t *testing.T) {
	f := newFixture(t)
	a := f.campaign(t)
	f.waitForStream(t)
	c := f.subscribe(t, proto.StreamSubjects, 0)
	c.waitUntil(t, "the first leader's resync marker", func(e []proto.Event) bool { return len(e) > 0 })
	b := f.campaign(t)
	first, second := a, b
	if !a.leading.Load() {
		first, second = b, a
	}

	const writes = 300
	rvs := make(chan []string, 1)
	go func() {
		var out []string
		for i := range writes {
			out = append(out, f.create(t, fmt.Sprintf("w-%03d", i)))
		}
		rvs <- out
	}()
	c.waitUntil(t, "a third of the writes", func(e []proto.Event) bool { return len(e) > writes/3 })
	first.stop()

	written := <-rvs
	got := c.waitForName(t, fmt.Sprintf("w-%03d", writes-1))
	if second.terms.Load() == 0 {
		t.Fatal("the second publisher never led")
	}
	want := []brief{{proto.Resync, "", got[0].ResourceVersion}}
	for i, r := range written {
		want = append(want, brief{proto.Added, fmt.Sprintf("w-%03d", i), r})
	}
	// Anything repeated would arrive before a change made after them all.
	rvEnd := f.create(t, "end")
	want = append(want, brief{proto.Added, "end", rvEnd})
	if diff := cmp.Diff(want, summary(c.waitForName(t, "end"))); diff != "" {
		t.Errorf("events across the failover (-want +got):\n%s", diff)
	}
}

func TestRestartedPublisherResumes(t *testing.T) {
	f := newFixture(t)
	stop := f.runPublisher(t)
	c := f.subscribe(t, proto.StreamSubjects, 0)
	start := c.waitUntil(t, "the resync marker", func(e []proto.Event) bool { return len(e) > 0 })[0].ResourceVersion
	rvA := f.create(t, "a")
	rvB := f.create(t, "b")
	c.waitForName(t, "b")
	stop()

	rvC := f.create(t, "c")
	rvA2 := f.update(t, "a", "v1")
	f.runPublisher(t)
	rvD := f.create(t, "d")

	want := []brief{
		{proto.Resync, "", start},
		{proto.Added, "a", rvA},
		{proto.Added, "b", rvB},
		{proto.Added, "c", rvC},
		{proto.Modified, "a", rvA2},
		{proto.Added, "d", rvD},
	}
	if diff := cmp.Diff(want, summary(c.waitForName(t, "d"))); diff != "" {
		t.Errorf("events across the restart (-want +got):\n%s", diff)
	}
}

func TestCompactionPastTheResumePointResyncs(t *testing.T) {
	f := newFixture(t)
	stop := f.runPublisher(t)
	c := f.subscribe(t, proto.StreamSubjects, 0)
	start := c.waitUntil(t, "the resync marker", func(e []proto.Event) bool { return len(e) > 0 })[0].ResourceVersion
	rvA := f.create(t, "a")
	rvB := f.create(t, "b")
	c.waitForName(t, "b")
	stop()

	f.delete(t, "a") // lost: the snapshot no longer has a
	rvC := f.create(t, "c")
	if _, err := f.etcd.Compact(context.Background(), f.revision(t)); err != nil {
		t.Fatalf("compact: %v", err)
	}
	rvD := f.create(t, "d")
	f.runPublisher(t)
	c.waitForName(t, "d")
	rvE := f.create(t, "e")

	want := []brief{
		{proto.Resync, "", start},
		{proto.Added, "a", rvA},
		{proto.Added, "b", rvB},
		{proto.Resync, "", rvD},
		{proto.Added, "b", rvB},
		{proto.Added, "c", rvC},
		{proto.Added, "d", rvD},
		{proto.Added, "e", rvE},
	}
	if diff := cmp.Diff(want, summary(c.waitForName(t, "e"))); diff != "" {
		t.Errorf("events across the compaction (-want +got):\n%s", diff)
	}
}
