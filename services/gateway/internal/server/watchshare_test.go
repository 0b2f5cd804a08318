package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/server"
)

// TestSharedWatches watches configmaps through the gateway with several
// clients at once and checks that they share one watch of core, each
// seeing what a watch of its own would have shown it.
func TestSharedWatches(t *testing.T) {
	in := start(t, 1, nil)
	cs, err := kubernetes.NewForConfig(in.certs.restConfig(t, in.gw.URL, in.admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("from resourceVersion 0, later watchers get the state", func(t *testing.T) {
		cms := createNamespace(ctx, t, cs, "share-zero")
		base := coreWatchers(t, in)
		for _, name := range []string{"b", "a"} {
			mustCreate(ctx, t, cms, name)
		}
		var ws []watch.Interface
		for range 3 {
			w := mustWatch(ctx, t, cms, metav1.ListOptions{ResourceVersion: "0"})
			ws = append(ws, w)
			// A state comes in no promised order.
			expectAnyOrder(ctx, t, w, "ADDED a", "ADDED b")
		}
		if n := coreWatchers(t, in) - base; n != 1 {
			t.Errorf("core has %d configmap watches for 3 watchers, want 1", n)
		}
		cm, err := cms.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"k": "v"}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			expect(ctx, t, w, "MODIFIED a", "DELETED b")
		}
		// A watcher joining now starts from the state the changes left.
		late := mustWatch(ctx, t, cms, metav1.ListOptions{ResourceVersion: "0"})
		ev := next(ctx, t, late)
		if got := describe(ev); got != "ADDED a" || ev.Object.(*corev1.ConfigMap).Data["k"] != "v" {
			t.Fatalf("late watcher's first event %s %v, want ADDED a with k=v", got, ev.Object)
		}
		mustCreate(ctx, t, cms, "c")
		for _, w := range append(ws, late) {
			expect(ctx, t, w, "ADDED c")
		}
		if n := coreWatchers(t, in) - base; n != 1 {
			t.Errorf("core has %d configmap watches for 4 watchers, want 1", n)
		}
		for _, w := range append(ws, late) {
			w.Stop()
		}
		waitFor(t, func() bool { return coreWatchers(t, in) == base })
	})

	t.Run("from a resourceVersion, later watchers catch up", func(t *testing.T) {
		cms := createNamespace(ctx, t, cs, "share-rv")
		base := coreWatchers(t, in)
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		from := list.ResourceVersion
		first := mustWatch(ctx, t, cms, metav1.ListOptions{ResourceVersion: from, AllowWatchBookmarks: true})
		one := mustCreate(ctx, t, cms, "one")
		expect(ctx, t, first, "ADDED one")
		// From the list: it gets the change it missed, from the stream.
		caughtUp := mustWatch(ctx, t, cms, metav1.ListOptions{ResourceVersion: from})
		expect(ctx, t, caughtUp, "ADDED one")
		// From the change: nothing before it.
		current := mustWatch(ctx, t, cms, metav1.ListOptions{ResourceVersion: one.ResourceVersion})
		mustCreate(ctx, t, cms, "two")
		for _, w := range []watch.Interface{first, caughtUp, current} {
			expect(ctx, t, w, "ADDED two")
		}
		if n := coreWatchers(t, in) - base; n != 1 {
			t.Errorf("core has %d configmap watches for 3 watchers, want 1", n)
		}

		// A watcher's timeout ends its own response only.
		timeout := int64(1)
		short := mustWatch(ctx, t, cms, metav1.ListOptions{ResourceVersion: one.ResourceVersion, TimeoutSeconds: &timeout})
		expect(ctx, t, short, "ADDED two")
		if ev, ok := <-short.ResultChan(); ok {
			t.Fatalf("watch with timeoutSeconds=1 got %s, want its end", describe(ev))
		}
		mustCreate(ctx, t, cms, "three")
		for _, w := range []watch.Interface{first, caughtUp, current} {
			expect(ctx, t, w, "ADDED three")
		}
		for _, w := range []watch.Interface{first, caughtUp, current} {
			w.Stop()
		}
		waitFor(t, func() bool { return coreWatchers(t, in) == base })
	})

	t.Run("watches that cannot share get their own", func(t *testing.T) {
		cms := createNamespace(ctx, t, cs, "share-not")
		base := coreWatchers(t, in)
		// Unset asks for the latest state, which only core has.
		a := mustWatch(ctx, t, cms, metav1.ListOptions{})
		b := mustWatch(ctx, t, cms, metav1.ListOptions{})
		if n := coreWatchers(t, in) - base; n != 2 {
			t.Errorf("core has %d configmap watches for 2 watchers from the latest state, want 2", n)
		}
		a.Stop()
		b.Stop()
		waitFor(t, func() bool { return coreWatchers(t, in) == base })
	})

	t.Run("core's refusal reaches the watcher as it is", func(t *testing.T) {
		cms := createNamespace(ctx, t, cs, "share-bad")
		base := coreWatchers(t, in)
		_, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "0", LabelSelector: "a in ("})
		if !apierrors.IsBadRequest(err) {
			t.Fatalf("watch with a bad selector: %v, want BadRequest", err)
		}
		// The refused stream leaves no trace: the next watcher opens one.
		w := mustWatch(ctx, t, cms, metav1.ListOptions{ResourceVersion: "0", LabelSelector: "a in (b)"})
		mustCreateLabeled(ctx, t, cms, "x", map[string]string{"a": "b"})
		expect(ctx, t, w, "ADDED x")
		w.Stop()
		waitFor(t, func() bool { return coreWatchers(t, in) == base })
	})
}

// TestSharingOff gives every watch its own watch of core.
func TestSharingOff(t *testing.T) {
	in := start(t, 1, func(o *server.Options) { o.ShareWatches = false })
	cs, err := kubernetes.NewForConfig(in.certs.restConfig(t, in.gw.URL, in.admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cms := createNamespace(ctx, t, cs, "unshared")
	base := coreWatchers(t, in)
	for range 2 {
		w := mustWatch(ctx, t, cms, metav1.ListOptions{ResourceVersion: "0"})
		defer w.Stop()
	}
	if n := coreWatchers(t, in) - base; n != 2 {
		t.Errorf("core has %d configmap watches for 2 watchers, want 2", n)
	}
}

type configMaps = interface {
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func createNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) interface {
	configMaps
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
} {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().ConfigMaps(name)
}

func mustCreate(ctx context.Context, t *testing.T, cms configMaps, name string) *corev1.ConfigMap {
	t.Helper()
	return mustCreateLabeled(ctx, t, cms, name, nil)
}

func mustCreateLabeled(ctx context.Context, t *testing.T, cms configMaps, name string, labels map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func mustWatch(ctx context.Context, t *testing.T, cms configMaps, opts metav1.ListOptions) watch.Interface {
	t.Helper()
	w, err := cms.Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// next is w's next event other than a bookmark.
func next(ctx context.Context, t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no event")
		}
	}
}

func describe(ev watch.Event) string {
	if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
		return string(ev.Type) + " " + cm.Name
	}
	return fmt.Sprintf("%s %T", ev.Type, ev.Object)
}

// expect checks w's next events, in order.
func expect(ctx context.Context, t *testing.T, w watch.Interface, want ...string) {
	t.Helper()
	for _, wt := range want {
		if got := describe(next(ctx, t, w)); got != wt {
			t.Fatalf("event %q, want %q", got, wt)
		}
	}
}

// expectAnyOrder checks w's next events, in any order.
func expectAnyOrder(ctx context.Context, t *testing.T, w watch.Interface, want ...string) {
	t.Helper()
	var got []string
	for range want {
		got = append(got, describe(next(ctx, t, w)))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q in any order", got, want)
	}
}

var configMapWatchers = regexp.MustCompile(`(?m)^apiserver_registered_watchers\{group="",kind="ConfigMap",version="v1"\} (\d+)$`)

// coreWatchers is how many watches of configmaps core has open, as its
// metrics say; its garbage collector keeps one of its own.
func coreWatchers(t *testing.T, in *installation) int {
	t.Helper()
	fp, err := in.certs.dir.Client(in.certs.ca, "metrics-reader", frontproxy.ClientName, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := in.certs.httpClient(t, fp)
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, in.cores[0].URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(frontproxy.UserHeader, "alice")
	req.Header.Set(frontproxy.GroupHeader, "system:masters")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("core metrics: %d %v: %s", resp.StatusCode, err, body)
	}
	m := configMapWatchers.FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
