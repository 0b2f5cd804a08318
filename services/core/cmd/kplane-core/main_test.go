package main_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/natstest"
	proto "kplane.dev/proto/changefeed"
	"kplane.dev/services/core/internal/coretest"
)

// TestBinary builds kplane-core, runs it as a process with flags against
// an embedded etcd and generated certificates, talks to it as the gateway
// would, and stops it with SIGTERM.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "kplane-core")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	etcd := etcdtest.Start(t)
	nats := natstest.Start(t)
	certs := coretest.NewCerts(t)

	cmd := exec.Command(bin,
		"--listen-address=127.0.0.1:0",
		"--tls-cert-file="+certs.Serving.Cert,
		"--tls-private-key-file="+certs.Serving.Key,
		"--client-ca-file="+certs.CAFile,
		"--requestheader-allowed-names="+coretest.GatewayName,
		"--etcd-servers="+etcd.Endpoint,
		"--etcd-prefix=/binary",
		"--nats-url="+nats.URL,
		"--compaction-interval=1m",
		"--log-format=json",
	)
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
		// The log says where the server listens; the rest goes to the
		// test's log.
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			t.Log(s.Text())
			var line struct{ Msg, Address string }
			if json.Unmarshal(s.Bytes(), &line) == nil && line.Msg == "serving" {
				addr <- line.Address
			}
		}
		exited <- cmd.Wait()
	}()
	// reaped is set once the test has received the exit; until then
	// cleanup kills the process and waits for it and its log.
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	var url string
	select {
	case a := <-addr:
		url = "https://" + a
	case err := <-exited:
		reaped = true
		t.Fatalf("kplane-core exited before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("kplane-core did not log its address")
	}
	waitReady(t, certs, url)

	cs, err := kubernetes.NewForConfig(certs.Config(t, url, certs.Gateway, coretest.Admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	created, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create through the binary: %v", err)
	}
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get through the binary: %v", err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.Data["k"] != "v" {
		t.Errorf("got %v, want the created configmap", got)
	}
	waitPublished(t, nats.JetStream(t), created.ResourceVersion)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		reaped = true
		if err != nil {
			t.Fatalf("kplane-core exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("kplane-core still running 20s after SIGTERM")
	}
}

// waitPublished waits for the change feed to carry the change at rv.
func waitPublished(t *testing.T, js jetstream.JetStream, rv string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		stream, err := js.Stream(ctx, proto.StreamName)
		if err == nil {
			var msg *jetstream.RawStreamMsg
			msg, err = stream.GetLastMsgForSubject(ctx, proto.Subject("", "v1", "configmaps"))
			if err == nil && msg.Header.Get(proto.HeaderRevision) == rv {
				return
			}
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("change at %s not published: %v", rv, last)
}

func waitReady(t *testing.T, certs *coretest.Certs, url string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.CA.Pool(), MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(url + "/readyz?verbose")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = &statusError{code: resp.StatusCode, body: string(body)}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kplane-core not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return http.StatusText(e.code) + ": " + e.body }
