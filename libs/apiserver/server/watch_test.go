package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// next returns the next event of w or fails the test.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch ended early")
		}
		return ev
	case <-time.After(wait):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

func TestWatch(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, kind)
			seeded := f.seedConfigMap("ns1", "a", map[string]string{"app": "x"}, nil)
			cms := f.typed().CoreV1().ConfigMaps("ns1")

			t.Run("from a resourceVersion, with selector", func(t *testing.T) {
				w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: seeded.ResourceVersion, LabelSelector: "app=x"})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				f.seedConfigMap("ns1", "other", map[string]string{"app": "y"}, nil)
				f.seedConfigMap("ns1", "b", map[string]string{"app": "x"}, nil)
				ev := next(t, w)
				if cm, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Added || !ok || cm.Name != "b" {
					t.Errorf("event = %s %v, want ADDED b", ev.Type, ev.Object)
				}
			})

			t.Run("initial events and bookmarks", func(t *testing.T) {
				yes := true
				w, err := cms.Watch(f.ctx, metav1.ListOptions{
					SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
					AllowWatchBookmarks: true, FieldSelector: "metadata.name=a",
				})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				if ev := next(t, w); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "a" {
					t.Fatalf("first event = %s %v, want ADDED a", ev.Type, ev.Object)
				}
				ev := next(t, w)
				cm, _ := ev.Object.(*corev1.ConfigMap)
				if ev.Type != watch.Bookmark || cm == nil || cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
					t.Fatalf("second event = %s %v, want the initial-events-end BOOKMARK", ev.Type, ev.Object)
				}
				// Periodic bookmarks follow (100ms progress notify or bookmark interval).
				if ev := next(t, w); ev.Type != watch.Bookmark || rvOf(t, ev.Object) == "" {
					t.Errorf("third event = %s %v, want a BOOKMARK with a resourceVersion", ev.Type, ev.Object)
				}
			})

			t.Run("timeoutSeconds ends the stream", func(t *testing.T) {
				timeout := int64(1)
				l, err := cms.List(f.ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, TimeoutSeconds: &timeout})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				select {
				case ev, ok := <-w.ResultChan():
					if ok {
						t.Errorf("event %s before the end, want none", ev.Type)
					}
				case <-time.After(wait):
					t.Error("watch did not end after timeoutSeconds")
				}
			})

			t.Run("client going away stops the watch", func(t *testing.T) {
				s, _ := f.store(configMapsGVR)
				// The watches of the subtests before have all ended.
				eventually(t, "earlier watches to stop", func() bool { return s.open.Load() == 0 })
				ctx, cancel := context.WithCancel(f.ctx)
				w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: seeded.ResourceVersion})
				if err != nil {
					t.Fatal(err)
				}
				eventually(t, "the store watch to open", func() bool { return s.open.Load() == 1 })
				cancel()
				w.Stop()
				eventually(t, "the store watch to stop", func() bool { return s.open.Load() == 0 })
			})

			t.Run("yaml watch is not acceptable", func(t *testing.T) {
				st := getStatus(t, f.url+"/api/v1/namespaces/ns1/configmaps?watch=true", "application/yaml")
				if st.Code != 406 || st.Message != "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch" {
					t.Errorf("yaml watch: %d %q", st.Code, st.Message)
				}
			})

			t.Run("invalid watch options", func(t *testing.T) {
				st := getStatus(t, f.url+"/api/v1/namespaces/ns1/configmaps?watch=true&sendInitialEvents=true", "")
				if st.Code != 422 || st.Reason != metav1.StatusReasonInvalid {
					t.Errorf("sendInitialEvents without match: %d %s %q", st.Code, st.Reason, st.Message)
				}
			})
		})
	}
}

func TestWatchExpired(t *testing.T) {
	f := newFixture(t, direct)
	old := f.seedConfigMap("ns1", "a", nil, nil)
	last := f.seedConfigMap("ns1", "b", nil, nil)
	rev, _ := strconv.ParseInt(last.ResourceVersion, 10, 64)
	if _, err := f.etcd.Compact(f.ctx, rev); err != nil {
		t.Fatal(err)
	}
	oldRV, _ := strconv.ParseInt(old.ResourceVersion, 10, 64)
	w, err := f.typed().CoreV1().ConfigMaps("ns1").Watch(f.ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(oldRV-1, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := next(t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("event = %s %#v, want ERROR with a 410 Expired Status", ev.Type, ev.Object)
	}
	if !apierrors.IsResourceExpired(apierrors.FromObject(st)) {
		t.Errorf("client-go does not read %v as expired", st)
	}
}

func TestWatchTable(t *testing.T) {
	f := newFixture(t, cached)
	f.seedConfigMap("ns1", "a", nil, map[string]string{"k": "v"})
	f.seedConfigMap("ns1", "b", nil, nil)
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, f.url+"/api/v1/namespaces/ns1/configmaps?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", kubectlTable)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("watch answered %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(resp.Body)
	for i, want := range []struct {
		name    string
		headers bool
	}{{"a", true}, {"b", false}} {
		if !lines.Scan() {
			t.Fatalf("stream ended before event %d: %v", i, lines.Err())
		}
		var ev struct {
			Type   string       `json:"type"`
			Object metav1.Table `json:"object"`
		}
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("event %d %s: %v", i, lines.Bytes(), err)
		}
		if ev.Type != "ADDED" || ev.Object.Kind != "Table" || len(ev.Object.Rows) != 1 || ev.Object.Rows[0].Cells[0] != want.name {
			t.Errorf("event %d = %s, want ADDED Table of %s", i, lines.Bytes(), want.name)
		}
		if got := len(ev.Object.ColumnDefinitions) > 0; got != want.headers {
			t.Errorf("event %d has column definitions %v, want %v", i, got, want.headers)
		}
	}
}
