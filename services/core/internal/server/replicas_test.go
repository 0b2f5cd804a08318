package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/changefeed"
	proto "kplane.dev/proto/changefeed"
	"kplane.dev/services/core/internal/coretest"
	"kplane.dev/services/core/internal/server"
)

const ns = "default"

func clientset(t *testing.T, cfg *restclient.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func configMap(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": value}}
}

func TestTwoReplicasServeTheSameData(t *testing.T) {
	c := coretest.Start(t, coretest.Options{Replicas: 2})
	a := clientset(t, c.Replicas[0].Config).CoreV1().ConfigMaps(ns)
	b := clientset(t, c.Replicas[1].Config).CoreV1().ConfigMaps(ns)
	ctx := context.Background()

	t.Run("a write on one is read from the other", func(t *testing.T) {
		created, err := a.Create(ctx, configMap("shared", "1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, rv := range []string{"", created.ResourceVersion} {
			got, err := b.Get(ctx, "shared", metav1.GetOptions{ResourceVersion: rv})
			if err != nil {
				t.Fatalf("get at resourceVersion %q from the other replica: %v", rv, err)
			}
			if got.ResourceVersion != created.ResourceVersion || got.Data["v"] != "1" {
				t.Errorf("get at %q = rv %s data %v, want rv %s data v=1", rv, got.ResourceVersion, got.Data, created.ResourceVersion)
			}
		}
		for _, opts := range []metav1.ListOptions{{}, {ResourceVersion: created.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}} {
			list, err := b.List(ctx, opts)
			if err != nil {
				t.Fatalf("list %+v from the other replica: %v", opts, err)
			}
			if len(list.Items) != 1 || list.Items[0].ResourceVersion != created.ResourceVersion {
				t.Errorf("list %+v = %v, want the configmap at rv %s", opts, list.Items, created.ResourceVersion)
			}
		}
	})

	t.Run("a watch on one sees the writes through the other in order", func(t *testing.T) {
		list, err := b.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := b.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		type change struct {
			typ watch.EventType
			rv  string
		}
		var want []change
		cm, err := a.Create(ctx, configMap("ordered", "0"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, change{watch.Added, cm.ResourceVersion})
		for i := 1; i <= 10; i++ {
			cm.Data["v"] = fmt.Sprint(i)
			if cm, err = a.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			want = append(want, change{watch.Modified, cm.ResourceVersion})
		}
		if err := a.Delete(ctx, "ordered", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, change{typ: watch.Deleted})
		timeout := time.After(30 * time.Second)
		for i, wc := range want {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch closed after %d events", i)
				}
				got, isCM := ev.Object.(*corev1.ConfigMap)
				if !isCM || ev.Type != wc.typ || got.Name != "ordered" || (wc.rv != "" && got.ResourceVersion != wc.rv) {
					t.Fatalf("event %d = %s %T %v, want %s of ordered at rv %q", i, ev.Type, ev.Object, ev.Object, wc.typ, wc.rv)
				}
			case <-timeout:
				t.Fatalf("watch saw %d of %d events", i, len(want))
			}
		}
	})

	t.Run("concurrent updates with the same stale version: one wins", func(t *testing.T) {
		base, err := a.Create(ctx, configMap("contended", "base"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for round := range 10 {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, client := range []interface {
				Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
			}{a, b} {
				wg.Go(func() {
					u := base.DeepCopy()
					u.Data["v"] = fmt.Sprintf("round %d replica %d", round, i)
					_, errs[i] = client.Update(ctx, u, metav1.UpdateOptions{})
				})
			}
			wg.Wait()
			wins, conflicts := 0, 0
			for _, err := range errs {
				switch {
				case err == nil:
					wins++
				case apierrors.IsConflict(err):
					conflicts++
				default:
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if wins != 1 || conflicts != 1 {
				t.Fatalf("round %d: %d updates won and %d conflicted, want 1 and 1: %v", round, wins, conflicts, errs)
			}
			if base, err = b.Get(ctx, "contended", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestOnlyTheGatewayIsTrusted(t *testing.T) {
	c := coretest.Start(t, coretest.Options{})
	r := c.Replicas[0]
	admin := coretest.Admin
	tests := []struct {
		name string
		cfg  *restclient.Config
	}{
		{name: "no client certificate", cfg: c.Certs.Config(t, r.URL, nil, admin)},
		{name: "a certificate of the CA with another CN", cfg: c.Certs.Config(t, r.URL, c.Certs.Client(t, "kubelet", "system:node:n1"), admin)},
		{name: "the gateway's certificate without a user", cfg: c.Certs.Config(t, r.URL, c.Certs.Gateway, frontproxy.User{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := clientset(t, tt.cfg).CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
			if !apierrors.IsUnauthorized(err) {
				t.Fatalf("err = %v, want 401 Unauthorized", err)
			}
			if msg := err.(apierrors.APIStatus).Status().Message; msg != "Unauthorized" {
				t.Errorf("message = %q, want Unauthorized", msg)
			}
		})
	}
	t.Run("spoofed identity headers without a certificate", func(t *testing.T) {
		hc := httpClient(c)
		req, _ := http.NewRequest(http.MethodGet, r.URL+"/api/v1/namespaces/default/configmaps", nil)
		req.Header.Set("X-Remote-User", "system:admin")
		req.Header.Add("X-Remote-Group", "system:masters")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"reason":"Unauthorized"`) {
			t.Errorf("status %d %s, want 401 Unauthorized", resp.StatusCode, body)
		}
	})
	t.Run("the gateway is trusted", func(t *testing.T) {
		if _, err := clientset(t, r.Config).CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("health checks need no certificate", func(t *testing.T) {
		hc := httpClient(c)
		for path, want := range map[string]string{
			"/readyz":         "ok",
			"/livez":          "ok",
			"/healthz":        "ok",
			"/readyz/etcd":    "ok",
			"/readyz?verbose": "[+]ping ok\n[+]etcd ok\n[+]poststarthook/system-namespaces ok\n[+]poststarthook/rbac/bootstrap-roles ok\n[+]shutdown ok\nreadyz check passed\n",
		} {
			resp, err := hc.Get(r.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != want {
				t.Errorf("%s = %d %q, want 200 %q", path, resp.StatusCode, body, want)
			}
		}
	})
	t.Run("the loopback needs no certificate", func(t *testing.T) {
		if _, err := clientset(t, r.Server.LoopbackConfig()).CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestShutdown checks the order of a replica's shutdown: unready while
// it still serves for the shutdown delay, then watches end and Run
// returns nil.
func TestShutdown(t *testing.T) {
	c := coretest.Start(t, coretest.Options{Modify: func(o *server.Options) { o.ShutdownDelay = 3 * time.Second }})
	r := c.Replicas[0]
	cms := clientset(t, r.Config).CoreV1().ConfigMaps(ns)
	w, err := cms.Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop() }()

	hc := httpClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	poll(ctx, t, "readyz to fail", func() error {
		resp, err := hc.Get(r.URL + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "[-]shutdown failed: reason withheld\n") {
			return fmt.Errorf("readyz = %d %q", resp.StatusCode, body)
		}
		return nil
	})
	if _, err := cms.List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("list while shutting down: %v", err)
	}

	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("replica did not stop with a watch open")
	}
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Error("watch delivered an event, want it closed")
		}
	case <-time.After(10 * time.Second):
		t.Error("watch still open after the replica stopped")
	}
}

// httpClient trusts the test CA and presents no certificate.
func httpClient(c *coretest.Cluster) *http.Client {
	cfg := &tls.Config{RootCAs: c.Certs.CA.Pool(), MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func TestChangeFeedPublishesWritesOfEveryReplica(t *testing.T) {
	c := coretest.Start(t, coretest.Options{Replicas: 2, NATS: true})
	js := c.NATS.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := js.Stream(ctx, proto.StreamName); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("stream %s never created: %v", proto.StreamName, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var rvs []string
	for i, r := range c.Replicas {
		cm, err := clientset(t, r.Config).CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprintf("feed-%d", i), "x"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs = append(rvs, cm.ResourceVersion)
	}
	events := make(chan proto.Event)
	subCtx, stop := context.WithCancel(ctx)
	subDone := make(chan error, 1)
	go func() {
		subDone <- changefeed.Subscribe(subCtx, js, proto.Subject("", "v1", "configmaps"), 0, func(ctx context.Context, e proto.Event) error {
			if e.Type == proto.Resync {
				// The first publisher marks where the feed begins.
				return nil
			}
			select {
			case events <- e:
				return nil
			case <-ctx.Done():
				return nil
			}
		})
	}()
	defer func() {
		stop()
		if err := <-subDone; err != nil {
			t.Errorf("subscribe: %v", err)
		}
	}()
	for i, rv := range rvs {
		select {
		case e := <-events:
			if e.Type != proto.Added || e.Name != fmt.Sprintf("feed-%d", i) || e.ResourceVersion != rv {
				t.Fatalf("event %d = %s %s at %s, want ADDED feed-%d at %s", i, e.Type, e.Name, e.ResourceVersion, i, rv)
			}
		case <-ctx.Done():
			t.Fatalf("saw %d of %d changes", i, len(rvs))
		}
	}
}

// TestControllersRunOnTheLeader checks the leader's work through the
// other replica while both serve: a new namespace gets its default
// ServiceAccount, and a deleted one is emptied, then finalized and gone.
func TestControllersRunOnTheLeader(t *testing.T) {
	c := coretest.Start(t, coretest.Options{Replicas: 2})
	cs := clientset(t, c.Replicas[1].Config)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "default serviceaccount in team", func() error {
		_, err := cs.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if _, err := cs.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "namespace team emptied", func() error {
		cms, err := cs.CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		sas, err := cs.CoreV1().ServiceAccounts("team").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(cms.Items) + len(sas.Items); n > 0 {
			return fmt.Errorf("%d objects left", n)
		}
		return nil
	})
	poll(ctx, t, "namespace team gone", func() error {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace still there: phase %s, finalizers %v, conditions %v", ns.Status.Phase, ns.Spec.Finalizers, ns.Status.Conditions)
	})
}

// poll calls f until it succeeds or ctx ends.
func poll(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	var last error
	for {
		err := f()
		if err == nil {
			return
		}
		if ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
