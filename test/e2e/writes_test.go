package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Bounds of the writes the resilience tests send while processes die.
const (
	// opTimeout bounds one write with its retries: long enough for the
	// launcher to bring a killed process back.
	opTimeout = 2 * time.Minute
	// retryBackoff is the pause before a write is sent again, as a
	// client's backoff.
	retryBackoff = 50 * time.Millisecond
	// dataKey is the configmap key a write sets.
	dataKey = "v"
)

// unthrottled is cfg without client-go's client-side rate limit, so that
// the load is what the test sends.
func unthrottled(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	return cfg
}

func clientset(t testing.TB, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(unthrottled(cfg))
	if err != nil {
		t.Fatalf("client-go clientset: %v", err)
	}
	return cs
}

// backendUnreachable says whether err is the gateway's answer to a request
// it could not deliver to any core replica (kube-aggregator's 503), which
// leaves the request unapplied or, when the replica died while handling
// it, unknown: a client sends it again.
func backendUnreachable(err error) bool {
	return apierrors.IsServiceUnavailable(err) && strings.Contains(err.Error(), "error trying to reach service")
}

// answerCut says whether err is the gateway's answer breaking off after
// it began: the replica died after it had answered the status line, which
// the gateway had already relayed, so it could not answer its 503
// instead and reset the client's stream. The write's outcome is unknown,
// as with that 503.
func answerCut(err error) bool {
	return strings.Contains(err.Error(), "stream error") && strings.Contains(err.Error(), "INTERNAL_ERROR")
}

// connectionLost says whether err is the client's connection failing
// before or while a request was answered: the gateway process is down or
// died. client-go sends GETs again itself; writes are sent again by the
// caller.
func connectionLost(err error) bool {
	// client-go wraps a response body cut short ("unexpected error when
	// reading response body"), which IsProbableEOF does not unwrap.
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "http2: client connection lost")
}

// writer writes configmaps of one namespace, sending a write again while
// retriable says its error is one a client retries, and remembers what
// every acknowledged write left: the final state the server must show.
// One goroutine uses a writer; each writer owns its names.
type writer struct {
	cs        kubernetes.Interface
	namespace string
	retriable func(error) bool
	// resent counts writes sent again after a retriable error, summed
	// over writers.
	resent *atomic.Int64

	// acked maps a name to the resourceVersion of its last acknowledged
	// write; a deleted name is absent.
	acked map[string]string
	// writes counts acknowledged writes.
	writes int
}

func newWriter(cs kubernetes.Interface, namespace string, retriable func(error) bool, resent *atomic.Int64) *writer {
	return &writer{cs: cs, namespace: namespace, retriable: retriable, resent: resent, acked: map[string]string{}}
}

// attempt runs op until it succeeds, fails with an error retriable does
// not accept, or opTimeout passes. settled is asked, after an attempt
// sent again failed, whether an earlier attempt took effect after all;
// it returns done when it did.
func (w *writer) attempt(ctx context.Context, what string, op func(context.Context) error, settled func(context.Context, error) (done bool, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	again := false
	for {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if again {
			if done, serr := settled(ctx, err); serr != nil {
				return fmt.Errorf("%s: after %w: %w", what, err, serr)
			} else if done {
				return nil
			}
		}
		if !w.retriable(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		again = true
		w.resent.Add(1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: still failing after %v: %w", what, opTimeout, err)
		case <-time.After(retryBackoff):
		}
	}
}

// create creates name with value; AlreadyExists on a resend is the first
// attempt having taken effect.
func (w *writer) create(ctx context.Context, name, value string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.namespace}, Data: map[string]string{dataKey: value}}
	return w.count(w.attempt(ctx, "create "+name,
		func(ctx context.Context) error {
			got, err := w.cs.CoreV1().ConfigMaps(w.namespace).Create(ctx, cm, metav1.CreateOptions{})
			if err == nil {
				w.acked[name] = got.ResourceVersion
			}
			return err
		},
		func(ctx context.Context, err error) (bool, error) {
			if !apierrors.IsAlreadyExists(err) {
				return false, nil
			}
			return w.confirm(ctx, name, value)
		}))
}

// update sets name's value on top of its last acknowledged write;
// Conflict on a resend is the first attempt having taken effect.
func (w *writer) update(ctx context.Context, name, value string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.namespace, ResourceVersion: w.acked[name]}, Data: map[string]string{dataKey: value}}
	return w.count(w.attempt(ctx, "update "+name,
		func(ctx context.Context) error {
			got, err := w.cs.CoreV1().ConfigMaps(w.namespace).Update(ctx, cm, metav1.UpdateOptions{})
			if err == nil {
				w.acked[name] = got.ResourceVersion
			}
			return err
		},
		func(ctx context.Context, err error) (bool, error) {
			if !apierrors.IsConflict(err) {
				return false, nil
			}
			return w.confirm(ctx, name, value)
		}))
}

// delete deletes name; NotFound on a resend is the first attempt having
// taken effect.
func (w *writer) delete(ctx context.Context, name string) error {
	err := w.attempt(ctx, "delete "+name,
		func(ctx context.Context) error {
			return w.cs.CoreV1().ConfigMaps(w.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		},
		func(_ context.Context, err error) (bool, error) {
			return apierrors.IsNotFound(err), nil
		})
	if err == nil {
		delete(w.acked, name)
	}
	return w.count(err)
}

// count counts an acknowledged write, and passes err on.
func (w *writer) count(err error) error {
	if err == nil {
		w.writes++
	}
	return err
}

// confirm reads name back after an ambiguous write and records it when it
// holds value, the write's; anything else is a write nobody made.
func (w *writer) confirm(ctx context.Context, name, value string) (bool, error) {
	var got *corev1.ConfigMap
	err := w.attempt(ctx, "read back "+name,
		func(ctx context.Context) error {
			var err error
			got, err = w.cs.CoreV1().ConfigMaps(w.namespace).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func(context.Context, error) (bool, error) { return false, nil })
	if err != nil {
		return false, err
	}
	if got.Data[dataKey] != value {
		return false, fmt.Errorf("%s holds %s=%q, want the resent write's %q", name, dataKey, got.Data[dataKey], value)
	}
	w.acked[name] = got.ResourceVersion
	return true, nil
}

// versions maps the names of configmaps to their resourceVersions.
type versions map[string]string

// listVersions lists namespace afresh (a quorum read from etcd).
func listVersions(ctx context.Context, cs kubernetes.Interface, namespace string) (versions, error) {
	list, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list configmaps of %s: %w", namespace, err)
	}
	v := versions{}
	for _, cm := range list.Items {
		v[cm.Name] = cm.ResourceVersion
	}
	return v, nil
}

// diff describes how got differs from want, or is empty.
func (want versions) diff(got versions) string {
	var b strings.Builder
	for name, rv := range want {
		switch g, ok := got[name]; {
		case !ok:
			fmt.Fprintf(&b, "%s (rv %s) missing; ", name, rv)
		case g != rv:
			fmt.Fprintf(&b, "%s at rv %s, want %s; ", name, g, rv)
		}
	}
	for name, rv := range got {
		if _, ok := want[name]; !ok {
			fmt.Fprintf(&b, "%s (rv %s) unexpected; ", name, rv)
		}
	}
	return b.String()
}

// eventually polls check until it returns nil or timeout passes, and
// returns its last error.
func eventually(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// errorLog keeps the first errors of concurrent workers, and counts all.
type errorLog struct {
	mu    sync.Mutex
	n     int
	first []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.first) < 10 {
		l.first = append(l.first, err)
	}
}

func (l *errorLog) report(t testing.TB, what string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		t.Errorf("%d %s failed, first: %v", l.n, what, errors.Join(l.first...))
	}
}
