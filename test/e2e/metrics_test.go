package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kplane.dev/deploy/grafana"
	"kplane.dev/deploy/launcher"
	"kplane.dev/libs/pki"
	"kplane.dev/test/e2e/harness"
)

// TestMetrics drives a little traffic through a whole kplane, scrapes
// every service's /metrics as Prometheus would (a client certificate of
// the cluster CA in group system:monitoring), and checks that every
// metric the Grafana dashboard reads is exported by the service its
// query names: a dashboard panel that stays empty is a metric renamed or
// never registered. It also checks who may read: the internal services
// refuse a client without a certificate of the CA, the gateway a user
// RBAC does not grant get /metrics, as kube does.
func TestMetrics(t *testing.T) {
	sys := harness.Start(t)
	if sys.Ports["core"] == 0 {
		t.Skip("scrapes each service on its own port, which a system the test did not start does not publish")
	}
	d := pki.Dir{Path: filepath.Join(sys.DataDir, "pki")}
	ca, err := d.CA("ca", "kplane-ca")
	if err != nil {
		t.Fatal(err)
	}
	prometheus, err := d.Client(ca, "e2e-prometheus", "e2e-prometheus", []string{"system:monitoring"})
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := d.Client(ca, "e2e-nobody", "e2e-nobody", nil)
	if err != nil {
		t.Fatal(err)
	}
	driveTraffic(t, sys)

	get := func(t *testing.T, port int, cert *pki.Cert) (int, []byte) {
		t.Helper()
		return scrape(t, "https://127.0.0.1:"+strconv.Itoa(port)+"/metrics", ca.Pool(), cert)
	}
	exported := map[string]map[string]bool{}
	for _, svc := range launcher.Services() {
		port := sys.Ports[svc.Name]
		if svc.Name == launcher.PublicService {
			code, body := get(t, port, nobody)
			if code != http.StatusForbidden {
				t.Errorf("gateway /metrics as a user without system:monitoring: %d %s, want 403", code, body)
			}
		} else if code, body := get(t, port, nil); code != http.StatusUnauthorized {
			t.Errorf("%s /metrics without a client certificate: %d %s, want 401", svc.Name, code, body)
		}
		code, body := get(t, port, prometheus)
		if code != http.StatusOK {
			t.Fatalf("%s /metrics as system:monitoring: %d %s", svc.Name, code, body)
		}
		exported["kplane-"+svc.Name] = sampleNames(t, body)
	}

	queries, err := grafana.Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		sels, err := grafana.Selectors(q.Expr)
		if err != nil {
			t.Errorf("panel %q: %v", q.Panel, err)
			continue
		}
		for _, s := range sels {
			if s.Job != "" {
				if !exported[s.Job][s.Metric] {
					t.Errorf("panel %q reads %s of %s, which %s does not export", q.Panel, s.Metric, s.Job, s.Job)
				}
				continue
			}
			if !slices.ContainsFunc(slices.Collect(maps.Values(exported)), func(names map[string]bool) bool { return names[s.Metric] }) {
				t.Errorf("panel %q reads %s, which no service exports", q.Panel, s.Metric)
			}
		}
	}
}

// driveTraffic makes every service record something: writes (admission,
// core, the change feed), a watch, a CRD and a custom resource (crd), a
// service account token used once (authn) and requests of a user
// without system:masters (authz).
func driveTraffic(t *testing.T, sys *harness.System) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := clientset(t, sys.RESTConfig(t))
	const ns = "e2e-metrics"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := admin.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m%d", i)}, Data: map[string]string{"k": "v"}}
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
			t.Fatal("the watch saw fewer than 3 configmaps")
		}
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().ConfigMaps(ns).Delete(ctx, "m0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	ext, err := apiextensionsclient.NewForConfig(sys.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "meters.e2e.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "e2e.example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "meters", Singular: "meter", Kind: "Meter", ListKind: "MeterList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true),
				}},
			}},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("CRD not established: %v", err)
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	meter := []byte(`{"apiVersion":"e2e.example.com/v1","kind":"Meter","metadata":{"name":"m"},"spec":{"n":1}}`)
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := admin.RESTClient().Post().AbsPath("/apis/e2e.example.com/v1/namespaces", ns, "meters").Body(meter).Do(ctx).Error()
		return err == nil, nil
	}); err != nil {
		t.Fatalf("create a custom resource: %v", err)
	}

	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "meter"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "meter", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	robot := clientset(t, sys.TokenConfig(tr.Status.Token))
	for range 2 {
		// Refused: the service account holds no role; authz decided it.
		if _, err := robot.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err == nil {
			t.Fatal("a service account without a role listed configmaps")
		}
	}
	if _, err := robot.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
}

// scrape GETs url trusting roots, presenting cert when not nil.
func scrape(t *testing.T, url string, roots *x509.CertPool, cert *pki.Cert) (int, []byte) {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLSCertificate()}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, body
}

// sampleNames are the names of the samples of a scrape in Prometheus'
// text format: a histogram's _bucket, _sum and _count, not its family.
func sampleNames(t *testing.T, body []byte) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if end := strings.IndexAny(line, "{ "); end > 0 {
			names[line[:end]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read scrape: %v", err)
	}
	return names
}
