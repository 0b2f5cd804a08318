package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"kplane.dev/test/e2e/harness"
)

// admittedCreates reads how many creates the admission service's
// mutating phase has answered, from its metrics.
func admittedCreates(t *testing.T, sys *harness.System) int {
	t.Helper()
	pem, err := os.ReadFile(sys.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get("https://127.0.0.1:" + strconv.Itoa(sys.Ports["admission"]) + "/metrics")
	if err != nil {
		t.Fatalf("read admission metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^apiserver_admission_step_admission_duration_seconds_count\{operation="CREATE",rejected="false",type="admit"\} (\d+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWritesAreAdmitted shows core's and crd's writes go through the
// admission service, as make up runs them.
func TestWritesAreAdmitted(t *testing.T) {
	sys := harness.Start(t)
	before := admittedCreates(t, sys)
	mustKubectl(t, sys, "create", "configmap", "admitted", "--from-literal=a=b")
	file := t.TempDir() + "/crd.yaml"
	if err := os.WriteFile(file, []byte(gadgetsCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, sys, "apply", "-f", file)
	if after := admittedCreates(t, sys); after < before+2 {
		t.Errorf("admission answered %d creates after a configmap and a CRD were created, %d before", after, before)
	}
}
