package changefeed

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestParseKey(t *testing.T) {
	const registry = "/kplane/registry/"
	tests := []struct {
		key  string
		want keyParts
		ok   bool
	}{
		{"/kplane/registry/core/configmaps/ns/a", keyParts{resource: "configmaps", namespace: "ns", name: "a"}, true},
		{"/kplane/registry/core/namespaces/ns", keyParts{resource: "namespaces", name: "ns"}, true},
		{"/kplane/registry/rbac.authorization.k8s.io/roles/ns/r", keyParts{group: "rbac.authorization.k8s.io", resource: "roles", namespace: "ns", name: "r"}, true},
		{"/kplane/registry/core/configmaps", keyParts{}, false},
		{"/kplane/registry/core/configmaps/ns/a/b", keyParts{}, false},
		{"/kplane/registry/core/configmaps/ns/", keyParts{}, false},
		{"/other/registry/core/configmaps/ns/a", keyParts{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, ok := parseKey(registry, tt.key)
			if ok != tt.ok || got != tt.want {
				t.Errorf("parseKey(%q) = %+v, %v; want %+v, %v", tt.key, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestSubjectMatches(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"kplane.changes.>", "kplane.changes.resync", true},
		{"kplane.changes.*", "kplane.changes.resync", true},
		{"kplane.changes.resync", "kplane.changes.resync", true},
		{"kplane.changes.core.>", "kplane.changes.resync", false},
		{"kplane.changes.*.v1.configmaps", "kplane.changes.resync", false},
		{"kplane.changes.resync.>", "kplane.changes.resync", false},
		{"kplane.>", "kplane.changes.core.v1.configmaps", true},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			if got := subjectMatches(tt.filter, tt.subject); got != tt.want {
				t.Errorf("subjectMatches(%q, %q) = %v, want %v", tt.filter, tt.subject, got, tt.want)
			}
		})
	}
}

// TestGather checks what the publisher reads from the watch before it
// publishes: one response without a linger; with one, every response
// that arrives within it, up to maxInFlight events.
func TestGather(t *testing.T) {
	events := func(n int) clientv3.WatchResponse {
		return clientv3.WatchResponse{Events: make([]*clientv3.Event, n)}
	}
	queued := func(closed bool, resps ...clientv3.WatchResponse) clientv3.WatchChan {
		ch := make(chan clientv3.WatchResponse, len(resps))
		for _, r := range resps {
			ch <- r
		}
		if closed {
			close(ch)
		}
		return ch
	}
	tests := []struct {
		name     string
		linger   time.Duration
		ch       clientv3.WatchChan
		wantLen  int
		wantOpen bool
	}{
		{"no linger takes one response", 0, queued(false, events(1), events(1), events(1)), 1, true},
		{"a linger takes what came", time.Hour, queued(true, events(1), events(2), events(3)), 3, false},
		{"a linger stops at maxInFlight events", time.Hour, queued(false, events(maxInFlight-1), events(1), events(1)), 2, true},
		{"a linger ends", time.Millisecond, queued(false, events(1), events(1)), 2, true},
		{"a closed watch", time.Hour, queued(true), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Publisher{o: options{linger: tt.linger}}
			got, open := p.gather(tt.ch, nil)
			if len(got) != tt.wantLen || open != tt.wantOpen {
				t.Errorf("gather = %d responses, open %v; want %d, open %v", len(got), open, tt.wantLen, tt.wantOpen)
			}
		})
	}
}
