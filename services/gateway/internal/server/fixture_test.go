package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/pki"
	"kplane.dev/services/gateway/internal/server"
)

// coreBinary is kplane-core, built once for every test in the package.
var coreBinary string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kplane-gateway-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	coreBinary = filepath.Join(dir, "kplane-core")
	if out, err := exec.Command("go", "build", "-o", coreBinary, "kplane.dev/services/core/cmd/kplane-core").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build kplane-core: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// certs are the certificates of a test installation.
type certs struct {
	dir pki.Dir
	ca  *pki.Cert
}

func newCerts(t *testing.T) *certs {
	t.Helper()
	d := pki.Dir{Path: t.TempDir()}
	ca, err := d.CA("ca", "kplane-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	c := &certs{dir: d, ca: ca}
	c.servingCert(t, "serving", nil)
	if _, err := d.Client(ca, "front-proxy-client", frontproxy.ClientName, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *certs) caFile() string { return c.dir.Files("ca").Cert }

func (c *certs) servingCert(t *testing.T, name string, hosts []string) *pki.Cert {
	t.Helper()
	cert, err := c.dir.Serving(c.ca, name, name, hosts)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func (c *certs) client(t *testing.T, user string, groups ...string) *pki.Cert {
	t.Helper()
	cert, err := c.dir.Client(c.ca, "client-"+user, user, groups)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// core is a kplane-core process.
type core struct {
	URL    string
	cmd    *exec.Cmd
	exited chan error
}

// startCore runs a core replica against etcd until the test ends.
func startCore(t *testing.T, c *certs, etcd *etcdtest.Server) *core {
	t.Helper()
	serving := c.dir.Files("serving")
	cmd := exec.Command(coreBinary,
		"--listen-address=127.0.0.1:0",
		"--tls-cert-file="+serving.Cert,
		"--tls-private-key-file="+serving.Key,
		"--client-ca-file="+c.caFile(),
		"--etcd-servers="+etcd.Endpoint,
		"--etcd-prefix=/gateway-test",
		"--shutdown-timeout=5s",
		"--log-format=json",
	)
	url, _ := serveProcess(t, "kplane-core", cmd)
	p := &core{URL: url, cmd: cmd}
	waitReady(t, c, url+"/readyz", nil)
	return p
}

// serveProcess starts cmd, which logs JSON, and returns the https URL of
// the address it logs as "serving", and a function that waits for the
// process to exit. The process is killed when the test ends.
func serveProcess(t *testing.T, name string, cmd *exec.Cmd) (string, func() error) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addr := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			var line struct{ Msg, Address string }
			if json.Unmarshal(s.Bytes(), &line) == nil && line.Msg == "serving" {
				addr <- line.Address
			}
		}
		exited <- cmd.Wait()
	}()
	// wait hands the exit on, so that cleanup and the test may both
	// wait for it.
	wait := func() error {
		err := <-exited
		exited <- err
		return err
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = wait()
	})
	select {
	case a := <-addr:
		return "https://" + a, wait
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not log its address", name)
	}
	return "", wait
}

// waitReady polls url until it answers 200.
func waitReady(t *testing.T, c *certs, url string, cert *pki.Cert) {
	t.Helper()
	client := c.httpClient(t, cert)
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%d: %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// httpClient trusts the test CA and presents cert when it is not nil.
func (c *certs) httpClient(t *testing.T, cert *pki.Cert) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: c.ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLSCertificate()}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
}

// restConfig is a client-go config of the gateway for cert.
func (c *certs) restConfig(t *testing.T, host string, cert *pki.Cert) *restclient.Config {
	t.Helper()
	key, err := cert.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return &restclient.Config{
		Host:            host,
		QPS:             -1,
		TLSClientConfig: restclient.TLSClientConfig{CAData: c.ca.CertPEM(), CertData: cert.CertPEM(), KeyData: key},
	}
}

// gateway is a gateway run in the test's process.
type gateway struct {
	URL    string
	Server *server.Server
	// Stop ends Run, as a signal would, and returns what it returned.
	Stop func() error
	log  *addrWriter
}

// logged reports whether the gateway has logged msg.
func (g *gateway) logged(msg string) bool {
	g.log.mu.Lock()
	defer g.log.mu.Unlock()
	return g.log.msgs[msg] > 0
}

// gatewayOptions are the flags of a gateway in front of cores.
func gatewayOptions(c *certs, natsURL string, cores ...*core) *server.Options {
	o := server.NewOptions()
	serving := c.dir.Files("serving")
	proxyClient := c.dir.Files("front-proxy-client")
	o.ListenAddress = "127.0.0.1:0"
	o.TLSCertFile, o.TLSPrivateKeyFile = serving.Cert, serving.Key
	o.ClientCAFile = c.caFile()
	o.NATS.URL = natsURL
	o.ProxyClientCertFile, o.ProxyClientKeyFile = proxyClient.Cert, proxyClient.Key
	o.BackendCAFile = c.caFile()
	o.CoreURLs = nil
	for _, cr := range cores {
		o.CoreURLs = append(o.CoreURLs, cr.URL)
	}
	o.ShutdownTimeout = 10 * time.Second
	o.AvailabilityInterval = 100 * time.Millisecond
	o.LogFormat = "json"
	return o
}

// startGateway runs a gateway with o until the test ends and waits for
// its routing table.
func startGateway(t *testing.T, o *server.Options) *gateway {
	t.Helper()
	lw := &addrWriter{t: t, addr: make(chan string, 1)}
	cfg, err := o.Config(lw)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var (
		stopOnce sync.Once
		runErr   error
	)
	stop := func() error {
		stopOnce.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("run gateway: %v", err)
		}
	})
	var url string
	select {
	case a := <-lw.addr:
		url = "https://" + a
	case err := <-done:
		done <- err // for the cleanup's stop
		t.Fatalf("gateway stopped before serving: %v", err)
	}
	// Ready means the routing table and the first documents are in.
	caPEM, err := os.ReadFile(o.ClientCAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(60 * time.Second)
	for !ready(client, url) {
		if time.Now().After(deadline) {
			t.Fatal("gateway not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &gateway{URL: url, Server: srv, Stop: stop, log: lw}
}

// addrWriter passes the gateway's JSON log to the test's and reports the
// address it serves on.
type addrWriter struct {
	t    *testing.T
	addr chan string
	mu   sync.Mutex
	// msgs counts the messages logged.
	msgs map[string]int
}

func (w *addrWriter) Write(p []byte) (int, error) {
	for l := range strings.SplitSeq(strings.TrimSpace(string(p)), "\n") {
		w.t.Log(l)
		var line struct{ Msg, Address string }
		if json.Unmarshal([]byte(l), &line) != nil {
			continue
		}
		w.mu.Lock()
		if w.msgs == nil {
			w.msgs = map[string]int{}
		}
		w.msgs[line.Msg]++
		w.mu.Unlock()
		if line.Msg == "serving" {
			select {
			case w.addr <- line.Address:
			default:
			}
		}
	}
	return len(p), nil
}

func ready(c *http.Client, url string) bool {
	resp, err := c.Get(url + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
