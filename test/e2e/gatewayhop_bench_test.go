package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kplane.dev/test/e2e/harness"
)

const (
	// listSize is how many configmaps the list benchmark lists.
	listSize = 100
	// eventTimeout bounds the wait for one watch event.
	eventTimeout = 30 * time.Second
)

// BenchmarkGatewayHop measures what the gateway's hop costs: the same
// client-go workload sent through the gateway (admin kubeconfig) and to
// core directly (as the gateway, with its front-proxy certificate), one
// request at a time. Compare via=gateway with via=core for each op:
//
//	go test -run '^$' -bench GatewayHop -benchtime 200x ./e2e/
func BenchmarkGatewayHop(b *testing.B) {
	sys := harness.Start(b)
	ctx := context.Background()
	vias := []struct {
		name string
		cfg  *rest.Config
	}{
		{name: "gateway", cfg: sys.RESTConfig(b)},
		{name: "core", cfg: sys.CoreConfig(b)},
	}
	setup := clientset(b, vias[0].cfg)
	for _, ns := range []string{"bench-list", "bench-create"} {
		if _, err := setup.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	for i := range listSize {
		if _, err := setup.CoreV1().ConfigMaps("bench-list").Create(ctx, benchConfigMap("bench-list", fmt.Sprintf("listed-%d", i)), metav1.CreateOptions{}); err != nil {
			b.Fatalf("create listed configmap: %v", err)
		}
	}

	ops := []struct {
		name string
		// run benchmarks op on objects whose names start with prefix.
		run func(b *testing.B, cs kubernetes.Interface, prefix string)
	}{
		{name: "get", run: benchGet},
		{name: "list", run: benchList},
		{name: "create", run: benchCreate},
		{name: "update", run: benchUpdate},
		{name: "watch", run: benchWatch},
	}
	// runs numbers the runs of the sub-benchmarks (-count), whose objects
	// are named after it so that every run creates its own.
	runs := 0
	for _, op := range ops {
		for _, via := range vias {
			b.Run(op.name+"/via="+via.name, func(b *testing.B) {
				runs++
				op.run(b, clientset(b, via.cfg), via.name+"-"+strconv.Itoa(runs))
			})
		}
	}
}

func benchConfigMap(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string]string{dataKey: "0"}}
}

// createFor creates the configmap one benchmark run works on.
func createFor(b *testing.B, cs kubernetes.Interface, name string) *corev1.ConfigMap {
	b.Helper()
	cm, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), benchConfigMap("default", name), metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("create %s: %v", name, err)
	}
	return cm
}

func benchGet(b *testing.B, cs kubernetes.Interface, prefix string) {
	ctx := context.Background()
	name := createFor(b, cs, prefix+"-get").Name
	for b.Loop() {
		if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			b.Fatalf("get: %v", err)
		}
	}
}

func benchList(b *testing.B, cs kubernetes.Interface, _ string) {
	ctx := context.Background()
	for b.Loop() {
		list, err := cs.CoreV1().ConfigMaps("bench-list").List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatalf("list: %v", err)
		}
		if len(list.Items) != listSize {
			b.Fatalf("list: %d configmaps, want %d", len(list.Items), listSize)
		}
	}
}

func benchCreate(b *testing.B, cs kubernetes.Interface, prefix string) {
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		cm := benchConfigMap("bench-create", prefix+"-"+strconv.Itoa(i))
		if _, err := cs.CoreV1().ConfigMaps("bench-create").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create: %v", err)
		}
	}
}

func benchUpdate(b *testing.B, cs kubernetes.Interface, prefix string) {
	ctx := context.Background()
	cm := createFor(b, cs, prefix+"-update")
	i := 0
	for b.Loop() {
		i++
		cm.Data[dataKey] = strconv.Itoa(i)
		var err error
		if cm, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			b.Fatalf("update: %v", err)
		}
	}
}

// benchWatch measures an update and the arrival of its event on a watch
// opened before: the latency a controller sees.
func benchWatch(b *testing.B, cs kubernetes.Interface, prefix string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm := createFor(b, cs, prefix+"-watch")
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", cm.Name).String(),
		ResourceVersion: cm.ResourceVersion,
	})
	if err != nil {
		b.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	i := 0
	for b.Loop() {
		i++
		cm.Data[dataKey] = strconv.Itoa(i)
		if cm, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			b.Fatalf("update: %v", err)
		}
		waitEvent(b, w, cm.ResourceVersion)
	}
}

// waitEvent reads w until the modification at rv arrives, for at most
// eventTimeout.
func waitEvent(b *testing.B, w watch.Interface, rv string) {
	b.Helper()
	timeout := time.NewTimer(eventTimeout)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("watch ended before the event at rv %s", rv)
			}
			if ev.Type == watch.Error {
				b.Fatalf("watch error: %v", ev.Object)
			}
			if m, err := meta.Accessor(ev.Object); err == nil && ev.Type == watch.Modified && m.GetResourceVersion() == rv {
				return
			}
		case <-timeout.C:
			b.Fatalf("no event at rv %s after %v", rv, eventTimeout)
		}
	}
}
