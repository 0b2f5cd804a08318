package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/test/e2e/harness"
)

// tracingRounds is how often each setting of each op is measured.
const tracingRounds = 3

// BenchmarkTracing measures what tracing costs the throughput of creates
// and gets of configmaps through the gateway, eight clients at once:
// "off" is a system without tracing; "sampler=0" is a system that sends
// spans to an OTLP receiver in the test but samples none of the traces
// it starts; "sampler=1" is that system sent requests with a sampled
// traceparent of their own, so that every span of every hop is made and
// exported, as sampling everything does. Both systems run at once and
// the settings take turns, tracingRounds times, so that they share the
// machine's drift; compare the settings of each op:
//
//	go test -run '^$' -bench 'Tracing$' -benchtime 2000x ./e2e/
func BenchmarkTracing(b *testing.B) {
	receiver := newOTLPReceiver(b)
	off := harness.Start(b)
	on := harness.Start(b, harness.WithTracing(receiver.URL, "http/protobuf", 0))
	sampled := on.RESTConfig(b)
	sampled.Wrap(func(rt http.RoundTripper) http.RoundTripper { return newTraceparents{next: rt} })
	settings := []struct {
		name string
		cs   kubernetes.Interface
		// got is the configmap the setting gets.
		got string
	}{
		{name: "off", cs: clientset(b, off.RESTConfig(b)), got: "got-off"},
		{name: "sampler=0", cs: clientset(b, on.RESTConfig(b)), got: "got-unsampled"},
		{name: "sampler=1", cs: clientset(b, sampled), got: "got-sampled"},
	}
	const ns = "bench-tracing"
	ctx := context.Background()
	for _, cs := range []kubernetes.Interface{settings[0].cs, settings[1].cs} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	for _, s := range settings {
		if _, err := s.cs.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap(ns, s.got), metav1.CreateOptions{}); err != nil {
			b.Fatalf("create the configmap to get: %v", err)
		}
	}
	var created atomic.Int64
	for range tracingRounds {
		for _, op := range []string{"create", "get"} {
			for _, s := range settings {
				b.Run(op+"/tracing="+s.name, func(b *testing.B) {
					b.SetParallelism(4)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							var err error
							if op == "create" {
								_, err = s.cs.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap(ns, "c-"+strconv.FormatInt(created.Add(1), 10)), metav1.CreateOptions{})
							} else {
								_, err = s.cs.CoreV1().ConfigMaps(ns).Get(ctx, s.got, metav1.GetOptions{})
							}
							if err != nil {
								b.Errorf("%s: %v", op, err)
								return
							}
						}
					})
				})
			}
		}
	}
	// Spans are exported in batches, at most seconds after they end.
	if err := eventually(ctx, 30*time.Second, func(context.Context) error {
		if receiver.count() == 0 {
			return errors.New("the sampled requests sent no span to the receiver")
		}
		return nil
	}); err != nil {
		b.Error(err)
	}
}

// newTraceparents sends every request as the first hop of a sampled trace
// of its own, as a client that traces every request does.
type newTraceparents struct{ next http.RoundTripper }

func (n newTraceparents) RoundTrip(r *http.Request) (*http.Response, error) {
	var ids [24]byte
	if _, err := rand.Read(ids[:]); err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", "00-"+hex.EncodeToString(ids[:16])+"-"+hex.EncodeToString(ids[16:])+"-01")
	return n.next.RoundTrip(r)
}
