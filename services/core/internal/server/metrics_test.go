package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/pki"
	"kplane.dev/services/core/internal/coretest"
)

// TestMetrics checks that /metrics refuses a client without a
// certificate of --client-ca-file, and shows a certificate of it what
// the user's requests did to storage, watches and the controllers'
// election.
func TestMetrics(t *testing.T) {
	c := coretest.Start(t, coretest.Options{})
	r := c.Replicas[0]
	cms := clientset(t, r.Config).CoreV1().ConfigMaps(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cms.Create(ctx, configMap("metered", "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.ResultChan():
	case <-ctx.Done():
		t.Fatal("no watch event")
	}

	get := func(t *testing.T, cert *pki.Cert) (int, string) { return scrape(t, c, r, cert) }

	t.Run("refused without a client certificate", func(t *testing.T) {
		if code, body := get(t, nil); code != http.StatusUnauthorized || strings.Contains(body, "etcd_requests_total") {
			t.Errorf("GET /metrics without a certificate = %d %q, want 401", code, body)
		}
	})
	t.Run("refused to a certificate of another CA", func(t *testing.T) {
		other := coretest.NewCerts(t)
		if code, _ := get(t, other.Gateway); code != http.StatusUnauthorized {
			t.Errorf("GET /metrics with another CA's certificate = %d, want 401", code)
		}
	})
	t.Run("served to a certificate of the client CA", func(t *testing.T) {
		code, body := get(t, c.Certs.Client(t, "prometheus", "prometheus"))
		if code != http.StatusOK {
			t.Fatalf("GET /metrics = %d %q", code, body)
		}
		for _, want := range []string{
			`etcd_requests_total{group="",operation="create",resource="configmaps"}`,
			`etcd_request_duration_seconds_bucket{group="",operation="create",resource="configmaps"`,
			`apiserver_storage_objects{resource="configmaps"}`,
			`apiserver_watch_cache_events_dispatched_total{group="",resource="configmaps"}`,
			`apiserver_registered_watchers{group="",kind="ConfigMap",version="v1"}`,
			`apiserver_watch_events_total{group="",kind="ConfigMap",version="v1"}`,
			`kplane_election_leader{election="controllers"}`,
			`go_goroutines`,
			`process_cpu_seconds_total`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s:\n%s", want, body)
			}
		}
	})
}

// scrape GETs r's /metrics with cert (none when nil).
func scrape(t *testing.T, c *coretest.Cluster, r *coretest.Replica, cert *pki.Cert) (int, string) {
	t.Helper()
	cfg := &tls.Config{RootCAs: c.Certs.CA.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLSCertificate()}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(r.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestGarbageCollectorReadsInProcess shows the garbage collector
// collecting a dependent of a deleted ConfigMap while it holds no watch
// of ConfigMaps over HTTP: it reads core's own resources from core's
// watch caches, where through the API every change would cost it an
// encoding, a decoding and, in production, the gateway's hop.
func TestGarbageCollectorReadsInProcess(t *testing.T) {
	c := coretest.Start(t, coretest.Options{})
	r := c.Replicas[0]
	cms := clientset(t, r.Config).CoreV1().ConfigMaps(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	owner, err := cms.Create(ctx, configMap("owner", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dependent := configMap("dependent", "1")
	dependent.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	if _, err := cms.Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the dependent collected", func() error {
		_, err := cms.Get(ctx, dependent.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	code, body := scrape(t, c, r, c.Certs.Client(t, "prometheus", "prometheus"))
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d %q", code, body)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, `apiserver_registered_watchers{group="",kind="ConfigMap",version="v1"}`) && !strings.HasSuffix(line, " 0") {
			t.Errorf("ConfigMaps are watched over HTTP: %s", line)
		}
	}
}
