//go:build compose

package compose

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
)

const (
	loadNS    = "load"
	createdNS = "load-created"
	keys      = 8
	workers   = 6
	// minOps is the least history porcupine checks.
	minOps = 10000
	// retryFor is how long one logical request is retried, as a client
	// would: a fault must be absorbed within it.
	retryFor = 45 * time.Second
)

// history records operations with their call and return times.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return time.Since(h.start).Nanoseconds() }

func (h *history) add(client int, in regInput, call int64, out regOutput) {
	ret := h.now()
	if out.unknown {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

func testFaults(t *testing.T, p *project) {
	admin, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admin.QPS, admin.Burst, admin.Timeout = -1, 0, 20*time.Second
	ac := kubernetes.NewForConfigOrDie(admin)
	ctx := context.Background()
	loader := loaderConfig(t, ac, admin)
	lc := kubernetes.NewForConfigOrDie(loader)

	for i := range keys {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key(i)}, Data: map[string]string{"v": "init"}}
		if _, err := lc.CoreV1().ConfigMaps(loadNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := lc.CoreV1().ConfigMaps(loadNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Watchers and an informer through every fault.
	stopWatch := make(chan struct{})
	var watchers []*recorder
	for range 2 {
		w := &recorder{}
		watchers = append(watchers, w)
		go w.run(t, lc, list.ResourceVersion, stopWatch)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(lc, 0, informers.WithNamespace(loadNS))
	informer := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(stopWatch)
	defer close(stopWatch)

	h := &history{start: time.Now()}
	var failed, retried atomic.Int64
	var failures sync.Map
	stopLoad := make(chan struct{})
	var wg sync.WaitGroup
	for c := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			load(lc, h, c, stopLoad, &failed, &retried, &failures)
		}()
	}
	var acked []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		acked = creates(lc, stopLoad, &failed, &failures)
	}()

	faults(t, p)
	// The history grows to minOps at least, faults or not.
	deadline := time.Now().Add(10 * time.Minute)
	for h.len() < minOps && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	close(stopLoad)
	wg.Wait()
	t.Logf("FIGURE load: %d operations in %v, %d attempts retried, %d logical requests failed after %v of retries",
		h.len(), time.Since(h.start).Round(time.Second), retried.Load(), failed.Load(), retryFor)
	if n := failed.Load(); n > 0 {
		failures.Range(func(k, v any) bool { t.Errorf("failed for good: %v", v); return true })
		t.Errorf("%d requests failed that a client retry did not absorb", n)
	}

	// The last word of every key, recorded as reads.
	for i := range keys {
		call := h.now()
		cm, err := lc.CoreV1().ConfigMaps(loadNS).Get(ctx, key(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h.add(workers, regInput{op: opRead, key: key(i)}, call, regOutput{value: cm.Data["v"], rv: rv(cm.ResourceVersion)})
	}
	if h.len() < minOps {
		t.Errorf("history of %d operations, want at least %d", h.len(), minOps)
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel.ToModel(), h.ops, 3*time.Minute)
	switch res {
	case porcupine.Ok:
		t.Logf("FIGURE porcupine: %d operations linearizable", len(h.ops))
	case porcupine.Unknown:
		t.Errorf("porcupine could not decide on %d operations in time", len(h.ops))
	default:
		file := filepath.Join(os.TempDir(), "kplane-compose-history.html")
		if f, err := os.Create(file); err == nil {
			_ = porcupine.Visualize(registerModel.ToModel(), info, f)
			_ = f.Close()
		}
		t.Errorf("history of %d operations is not linearizable (see %s)", len(h.ops), file)
	}

	// Every acknowledged create is there.
	created, err := ac.CoreV1().ConfigMaps(createdNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range created.Items {
		have[cm.Name] = true
	}
	lost := 0
	for _, n := range acked {
		if !have[n] {
			lost++
		}
	}
	t.Logf("FIGURE creates: %d acknowledged, %d lost", len(acked), lost)
	if lost > 0 {
		t.Errorf("%d acknowledged creates are gone", lost)
	}

	// Watchers and the informer end equal to a fresh list.
	fresh, err := ac.CoreV1().ConfigMaps(loadNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, cm := range fresh.Items {
		want[cm.Name] = cm.ResourceVersion
	}
	for i, w := range watchers {
		if err := w.check(want, rv(fresh.ResourceVersion)); err != nil {
			t.Errorf("watcher %d: %v", i, err)
		} else {
			t.Logf("FIGURE watcher %d: %d events, none missed or repeated, %d re-watches", i, w.events(), w.rewatches.Load())
		}
	}
	if err := waitFor(time.Minute, func() error {
		got := map[string]string{}
		for _, o := range informer.GetStore().List() {
			cm := o.(*corev1.ConfigMap)
			got[cm.Name] = cm.ResourceVersion
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("informer holds %v, a fresh list %v", got, want)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// loaderConfig is a service account's token configuration, allowed what
// the load does: every request it makes is authenticated by authn and
// authorized by authz, which the admin's would not be.
func loaderConfig(t *testing.T, ac *kubernetes.Clientset, admin *rest.Config) *rest.Config {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{loadNS, createdNS} {
		if _, err := ac.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "loader"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update"},
		}}}
		if _, err := ac.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "loader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "loader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "loader", Namespace: loadNS}},
		}
		if _, err := ac.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ac.CoreV1().ServiceAccounts(loadNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "loader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exp := int64(3600)
	tr, err := ac.CoreV1().ServiceAccounts(loadNS).CreateToken(ctx, "loader", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst, cfg.Timeout = -1, 0, 20*time.Second
	return cfg
}

func key(i int) string { return "k" + strconv.Itoa(i) }

func rv(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// load runs reads, blind updates and compare-and-swap updates on random
// keys until stop, recording every attempt in h. A request is retried
// until retryFor has passed, as a client would; one that never succeeds
// counts in failed.
func load(c *kubernetes.Clientset, h *history, client int, stop <-chan struct{}, failed, retried *atomic.Int64, failures *sync.Map) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(client), 42))
	lastRV := map[string]int64{}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		k := key(rng.IntN(keys))
		in := regInput{key: k, value: fmt.Sprintf("c%d-%d", client, i)}
		switch n := rng.IntN(10); {
		case n < 4, n >= 7 && lastRV[k] == 0:
			// An update with resourceVersion 0 is unconditional, so a
			// compare-and-swap needs a resourceVersion read before.
			in.op = opRead
		case n < 7:
			in.op = opWrite
		default:
			in.op = opCAS
			in.rv = lastRV[k]
		}
		began := time.Now()
		for attempt := 0; ; attempt++ {
			call := h.now()
			out, err := do(ctx, c, in)
			if err == nil {
				h.add(client, in, call, out)
				if out.rv > 0 {
					lastRV[k] = out.rv
				}
				break
			}
			// A failed read changed nothing; a failed write may have.
			if in.op != opRead {
				h.add(client, in, call, regOutput{unknown: true})
			}
			if time.Since(began) > retryFor {
				failed.Add(1)
				failures.Store(fmt.Sprintf("%d-%d", client, i), fmt.Sprintf("%s %s: %v", in.op, k, err))
				break
			}
			retried.Add(1)
			time.Sleep(time.Duration(min(attempt+1, 10)) * 100 * time.Millisecond)
		}
	}
}

// do sends one operation; an error means its outcome is unknown.
func do(ctx context.Context, c *kubernetes.Clientset, in regInput) (regOutput, error) {
	cms := c.CoreV1().ConfigMaps(loadNS)
	switch in.op {
	case opRead:
		cm, err := cms.Get(ctx, in.key, metav1.GetOptions{})
		if err != nil {
			return regOutput{}, err
		}
		return regOutput{value: cm.Data["v"], rv: rv(cm.ResourceVersion)}, nil
	default:
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: in.key}, Data: map[string]string{"v": in.value}}
		if in.op == opCAS {
			cm.ResourceVersion = strconv.FormatInt(in.rv, 10)
		}
		got, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if in.op == opCAS && apierrors.IsConflict(err) {
			return regOutput{conflict: true}, nil
		}
		if err != nil {
			return regOutput{}, err
		}
		return regOutput{value: got.Data["v"], rv: rv(got.ResourceVersion)}, nil
	}
}

// creates makes new ConfigMaps one after another until stop and returns
// the names whose creation was acknowledged.
func creates(c *kubernetes.Clientset, stop <-chan struct{}, failed *atomic.Int64, failures *sync.Map) []string {
	ctx := context.Background()
	var acked []string
	for i := 0; ; i++ {
		select {
		case <-stop:
			return acked
		default:
		}
		name := "c" + strconv.Itoa(i)
		began := time.Now()
		for attempt := 0; ; attempt++ {
			_, err := c.CoreV1().ConfigMaps(createdNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			// AlreadyExists on a retry: the attempt whose answer was
			// lost created it.
			if err == nil || attempt > 0 && apierrors.IsAlreadyExists(err) {
				acked = append(acked, name)
				break
			}
			if time.Since(began) > retryFor {
				failed.Add(1)
				failures.Store("create-"+name, fmt.Sprintf("create %s: %v", name, err))
				break
			}
			time.Sleep(time.Duration(min(attempt+1, 10)) * 100 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorder is a watch of the load's ConfigMaps from one resourceVersion
// on, resumed after every break as client-go's RetryWatcher does.
type recorder struct {
	mu        sync.Mutex
	rvs       []int64
	state     map[string]string
	err       error
	rewatches atomic.Int64
}

func (r *recorder) run(t *testing.T, c *kubernetes.Clientset, from string, stop <-chan struct{}) {
	r.state = map[string]string{}
	lw := &cache.ListWatch{WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
		r.rewatches.Add(1)
		// A watch on a replica that went silent ends by itself.
		timeout := int64(30)
		o.TimeoutSeconds = &timeout
		o.FieldSelector = fields.Everything().String()
		return c.CoreV1().ConfigMaps(loadNS).Watch(context.Background(), o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(context.Background(), from, lw)
	if err != nil {
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		return
	}
	defer w.Stop()
	for {
		select {
		case <-stop:
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				r.mu.Lock()
				r.err = errors.New("watch ended")
				r.mu.Unlock()
				return
			}
			if ev.Type == watch.Error {
				r.mu.Lock()
				r.err = apierrors.FromObject(ev.Object)
				r.mu.Unlock()
				return
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			r.mu.Lock()
			r.rvs = append(r.rvs, rv(cm.ResourceVersion))
			if ev.Type == watch.Deleted {
				delete(r.state, cm.Name)
			} else {
				r.state[cm.Name] = cm.ResourceVersion
			}
			r.mu.Unlock()
		}
	}
}

func (r *recorder) events() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.rvs)
}

// check waits until the watch has reached listRV, then checks that its
// resourceVersions strictly increased (nothing repeated or out of order)
// and that replaying it gives want (nothing missed).
func (r *recorder) check(want map[string]string, listRV int64) error {
	return waitFor(time.Minute, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.err != nil {
			return r.err
		}
		for i := 1; i < len(r.rvs); i++ {
			if r.rvs[i] <= r.rvs[i-1] {
				return fmt.Errorf("event %d has resourceVersion %d after %d", i, r.rvs[i], r.rvs[i-1])
			}
		}
		if fmt.Sprint(r.state) != fmt.Sprint(want) {
			last := int64(0)
			if len(r.rvs) > 0 {
				last = r.rvs[len(r.rvs)-1]
			}
			return fmt.Errorf("replayed events give %v (last resourceVersion %d), a fresh list at %d gives %v", r.state, last, listRV, want)
		}
		return nil
	})
}

func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// faults scales, kills, restarts and cuts off, waiting for health after
// each, and reports how the load spread over the replicas.
func faults(t *testing.T, p *project) {
	t.Helper()
	time.Sleep(10 * time.Second)
	scaled := map[string]int{"etcd": 1, "nats": 1, "core": 2, "crd": 1, "gateway": 1, "authn": 1, "authz": 3, "admission": 2}
	p.run(t, "up", "-d", "--no-recreate", "--scale", "authz=3", "--scale", "core=2", "--scale", "admission=2")
	took := p.waitHealthy(t, scaled, 3*time.Minute)
	t.Logf("FIGURE scaled to authz=3 core=2 admission=2, healthy in %v", took.Round(time.Second))

	before := p.cpu(t)
	time.Sleep(20 * time.Second)
	p.reportSpread(t, before, p.cpu(t))

	for _, svc := range []string{"authz", "core", "admission"} {
		id := p.containers(t, svc, false)[0]
		docker(t, "kill", id)
		t.Logf("killed one %s replica", svc)
	}
	time.Sleep(5 * time.Second)
	p.restartStopped(t)
	took = p.waitHealthy(t, scaled, 3*time.Minute)
	t.Logf("FIGURE killed one replica of authz, core and admission: all healthy again in %v", took.Round(time.Second))

	for _, svc := range []string{"etcd", "nats"} {
		docker(t, "restart", "--time", "5", p.containers(t, svc, false)[0])
		took = p.waitHealthy(t, scaled, 3*time.Minute)
		t.Logf("FIGURE restarted %s: all healthy again in %v", svc, took.Round(time.Second))
		time.Sleep(5 * time.Second)
	}

	id := p.containers(t, "core", false)[1]
	nets := strings.Fields(docker(t, "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", id))
	for _, n := range nets {
		docker(t, "network", "disconnect", n, id)
	}
	t.Logf("cut core replica %s off %v", id[:12], nets)
	time.Sleep(20 * time.Second)
	for _, n := range nets {
		docker(t, "network", "connect", n, id)
	}
	took = p.waitHealthy(t, scaled, 3*time.Minute)
	t.Logf("FIGURE core replica back on the network: all healthy again in %v", took.Round(time.Second))
	time.Sleep(10 * time.Second)
}

// restartStopped starts the project's containers that are not running: a
// killed container comes back by its restart policy on some engines and
// stays down on others, as `docker kill` counts as stopping it by hand.
func (p *project) restartStopped(t *testing.T) {
	t.Helper()
	for _, svc := range services {
		for _, id := range p.containers(t, svc, true) {
			if docker(t, "inspect", "--format", "{{.State.Running}}", id) == "false" {
				docker(t, "start", id)
			}
		}
	}
}

// cpu is every kplane container's CPU time so far, by container name,
// from its cgroup; nothing where the cgroup cannot be read.
func (p *project) cpu(t *testing.T) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	for _, svc := range services {
		for _, id := range p.containers(t, svc, false) {
			name := strings.TrimPrefix(docker(t, "inspect", "--format", "{{.Name}}", id), "/")
			for _, f := range []string{
				"/sys/fs/cgroup/cpuacct/docker/" + id + "/cpuacct.usage",
				"/sys/fs/cgroup/cpuacct/system.slice/docker-" + id + ".scope/cpuacct.usage",
			} {
				if b, err := os.ReadFile(f); err == nil {
					n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
					out[name] = time.Duration(n)
					break
				}
			}
			for _, f := range []string{
				"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/cpu.stat",
				"/sys/fs/cgroup/docker/" + id + "/cpu.stat",
			} {
				if b, err := os.ReadFile(f); err == nil {
					for _, l := range strings.Split(string(b), "\n") {
						if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
							n, _ := strconv.ParseInt(v, 10, 64)
							out[name] = time.Duration(n) * time.Microsecond
						}
					}
					break
				}
			}
		}
	}
	return out
}

// reportSpread logs each scaled service's CPU time by replica over a
// window of load, and fails when a replica of core or authz did no work:
// the gateway must spread over core's addresses and NATS queue groups
// over authz's replicas.
func (p *project) reportSpread(t *testing.T, before, after map[string]time.Duration) {
	t.Helper()
	if len(after) == 0 {
		t.Log("FIGURE load spread: no cgroup CPU accounting readable here")
		return
	}
	for _, svc := range []string{"core", "authz", "admission"} {
		var parts []string
		var total time.Duration
		var used []time.Duration
		var names []string
		for name := range after {
			if strings.Contains(name, "_"+svc+"_") || strings.Contains(name, "-"+svc+"-") {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			d := after[name] - before[name]
			used = append(used, d)
			total += d
			parts = append(parts, fmt.Sprintf("%s %v", name, d.Round(time.Millisecond)))
		}
		t.Logf("FIGURE load spread over 20s, %s CPU time: %s", svc, strings.Join(parts, ", "))
		if svc == "admission" || total == 0 {
			continue
		}
		for i, d := range used {
			if d < total/10 {
				t.Errorf("%s did %v of %s's %v of work: the load is not spread", names[i], d, svc, total)
			}
		}
	}
}
