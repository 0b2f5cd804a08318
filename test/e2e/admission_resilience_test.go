package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/test/e2e/harness"
)

// caseConfigMap is a configmap the webhooks of case c see.
func caseConfigMap(name, c string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "b"}}
	if c != "" {
		cm.Labels = map[string]string{"kplane.test/case": c}
	}
	return cm
}

// awaitDenial waits until creates of case c are refused by its webhook on
// every admission replica: the first refusal, then ten in a row.
func awaitDenial(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, c string) {
	t.Helper()
	n := 0
	try := func() error {
		n++
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, caseConfigMap(fmt.Sprintf("await-%s-%d", c, n), c), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "denied the request") {
			return fmt.Errorf("create of case %s: %v, want refused by its webhook", c, err)
		}
		return nil
	}
	if err := eventually(ctx, 10*time.Second, func(context.Context) error { return try() }); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := try(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdmissionReplicaKilledUnderLoad SIGKILLs one of two admission
// replicas while writes run, half of them refused by a webhook: no write
// the webhook passes fails, none it refuses is stored, none is lost.
func TestAdmissionReplicaKilledUnderLoad(t *testing.T) {
	sys := harness.Start(t, harness.WithReplicas("admission", 2))
	ctx := context.Background()
	cs := clientset(t, unthrottled(sys.RESTConfig(t)))
	hook := newAdmissionWebhook(t)
	// Every write of the load asks a webhook that takes a while, so
	// that reviews are under way on the replica killed.
	applyManifest(t, sys, hook.configuration("ValidatingWebhookConfiguration", "deny", "/deny-slowly", ""))
	applyManifest(t, sys, hook.configuration("ValidatingWebhookConfiguration", "pass", "/warn-slowly", ""))
	awaitDenial(ctx, t, cs, "default", "deny")

	// The load runs through the kill, so that reviews are under way on
	// the replica when it dies.
	const workers = 8
	var (
		allowed, refused sync.Map
		acked, failures  atomic.Int64
		firstErr         atomic.Value
		stop             = make(chan struct{})
		wg               sync.WaitGroup
	)
	write := func(ctx context.Context, name string, deny bool) error {
		if deny {
			_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, caseConfigMap(name, "deny"), metav1.CreateOptions{})
			if err == nil {
				return fmt.Errorf("create %s: stored although the webhook refuses it", name)
			}
			if !strings.Contains(err.Error(), `admission webhook "deny.kplane.test" denied the request: no writes here`) {
				return fmt.Errorf("create %s: %w, want the webhook's refusal", name, err)
			}
			refused.Store(name, true)
			return nil
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, caseConfigMap(name, "pass"), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s, which the webhook passes: %w", name, err)
		}
		allowed.Store(name, true)
		return nil
	}
	for w := range workers {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := write(ctx, fmt.Sprintf("load-%d-%d", w, k), k%2 == 1); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				acked.Add(1)
			}
		})
	}
	ackedMore := func(n int64, what string) {
		from := acked.Load()
		if err := eventually(ctx, convergeTimeout, func(context.Context) error {
			if got := acked.Load() - from; got < n {
				return fmt.Errorf("%d writes decided %s", got, what)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
	ackedMore(40, "before the kill")
	pid := sys.PID(t, "admission-0")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill admission-0 (pid %d): %v", pid, err)
	}
	sys.WaitReplaced(t, "admission-0", pid)
	ackedMore(40, "after the replica came back")
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d writes ended unlike the webhook decides; the first: %v", n, firstErr.Load())
	}
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, cm := range list.Items {
		stored[cm.Name] = true
	}
	n := 0
	allowed.Range(func(k, _ any) bool {
		n++
		if !stored[k.(string)] {
			t.Errorf("configmap %s was acknowledged but is not stored", k)
		}
		return true
	})
	refused.Range(func(k, _ any) bool {
		if stored[k.(string)] {
			t.Errorf("configmap %s was refused but is stored", k)
		}
		return true
	})
	t.Logf("%d writes passed and stored, %d refused by the webhook", n, acked.Load()-int64(n))
}

// restartableServer is an HTTPS server that can stop and start again on
// the same address, as a webhook's pod does when it is replaced.
type restartableServer struct {
	addr    string
	tls     *tls.Config
	handler http.Handler
	srv     *http.Server
	done    chan error
}

func (s *restartableServer) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatalf("listen on %s again: %v", s.addr, err)
	}
	s.srv = &http.Server{Handler: s.handler, TLSConfig: s.tls, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan error, 1)
	go func() { s.done <- s.srv.ServeTLS(ln, "", "") }()
}

func (s *restartableServer) stop(t *testing.T) {
	t.Helper()
	// Close, not Shutdown: connections in use break as a killed
	// process's do.
	if err := s.srv.Close(); err != nil {
		t.Errorf("stop the webhook: %v", err)
	}
	if err := <-s.done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("webhook server: %v", err)
	}
}

// TestWebhookRestartedUnderLoad stops a webhook server during a load of
// writes and starts it again: while it is down, writes it fails closed
// for are refused with kube's message and those it ignores failures for
// pass; before and after, every write passes.
func TestWebhookRestartedUnderLoad(t *testing.T) {
	sys := harness.Start(t)
	ctx := context.Background()
	cs := clientset(t, unthrottled(sys.RESTConfig(t)))
	hook := newAdmissionWebhook(t)
	// The webhook serves on an address of its own that can be taken
	// again after it stops.
	addr := hook.Listener.Addr().String()
	server := &restartableServer{addr: addr, tls: hook.TLS, handler: hook.Config.Handler}
	hook.Close()
	server.start(t)
	defer func() { _ = server.srv.Close() }()
	for _, c := range []struct{ name, policy string }{{"closed", "Fail"}, {"open", "Ignore"}} {
		applyManifest(t, sys, hook.configuration("ValidatingWebhookConfiguration", c.name, "/warn", "  failurePolicy: "+c.policy+"\n  timeoutSeconds: 2\n"))
	}
	// Wait until both configurations are in force: the webhook is asked.
	if err := eventually(ctx, 10*time.Second, func(ctx context.Context) error {
		before, _ := hook.callsOf("/warn")
		for _, c := range []string{"closed", "open"} {
			if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, caseConfigMap(fmt.Sprintf("await-%s-%d", c, time.Now().UnixNano()), c), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		if after, _ := hook.callsOf("/warn"); after < before+2 {
			return fmt.Errorf("the webhook was asked %d times for 2 writes", after-before)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	var (
		down                     atomic.Bool
		passed                   atomic.Int64
		closedFailed, unexpected atomic.Int64
		wg                       sync.WaitGroup
		stopLoad                 = make(chan struct{})
		firstErr                 sync.Once
		errText                  atomic.Value
	)
	const want = `Internal error occurred: failed calling webhook "closed.kplane.test": failed to call webhook: Post "`
	for w := range 4 {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				c := "open"
				if k%2 == 0 {
					c = "closed"
				}
				wasDown := down.Load()
				_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, caseConfigMap(fmt.Sprintf("load-%d-%d", w, k), c), metav1.CreateOptions{})
				isDown := down.Load()
				switch {
				case err == nil:
					passed.Add(1)
				case c == "closed" && (wasDown || isDown) && apierrors.IsInternalError(err) && strings.Contains(err.Error(), want):
					closedFailed.Add(1)
				default:
					unexpected.Add(1)
					firstErr.Do(func() {
						errText.Store(fmt.Sprintf("create of case %s (webhook down before: %t, after: %t): %v", c, wasDown, isDown, err))
					})
				}
			}
		})
	}
	// passedSome waits for 20 more writes to pass than had at its call.
	passedSome := func(what string) {
		from := passed.Load()
		if err := eventually(ctx, 30*time.Second, func(context.Context) error {
			if n := passed.Load() - from; n < 20 {
				return fmt.Errorf("%d writes passed %s", n, what)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
	passedSome("before the webhook stops")
	down.Store(true)
	server.stop(t)
	// Down until writes it fails closed for have been refused.
	if err := eventually(ctx, 30*time.Second, func(context.Context) error {
		if closedFailed.Load() < 4 {
			return fmt.Errorf("%d writes refused while the webhook is down", closedFailed.Load())
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	server.start(t)
	down.Store(false)
	passedSome("after the webhook is back")
	close(stopLoad)
	wg.Wait()
	if n := unexpected.Load(); n > 0 {
		t.Errorf("%d writes ended unlike the failurePolicy says; the first: %v", n, errText.Load())
	}
	t.Logf("%d writes refused while the webhook was down", closedFailed.Load())
}
