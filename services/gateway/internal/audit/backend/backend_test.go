package backend

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/libs/natstest"
	"kplane.dev/libs/pki"
	"kplane.dev/proto/access"
	auditstream "kplane.dev/proto/audit"
	"kplane.dev/services/gateway/internal/audit"
)

// event is an encoded event of stage with a payload of about size
// bytes.
func event(t *testing.T, id string, stage auditv1.Stage, size int) audit.Encoded {
	t.Helper()
	ev := auditv1.Event{Level: auditv1.LevelMetadata, AuditID: "x", Stage: stage, RequestURI: "/api/v1/namespaces/default/configmaps?pad=" + strings.Repeat("p", size)}
	ev.APIVersion, ev.Kind = auditv1.SchemeGroupVersion.String(), "Event"
	ev.AuditID = types.UID(id)
	data, err := json.Marshal(&ev)
	if err != nil {
		t.Fatal(err)
	}
	return audit.Encoded{AuditID: id, Stage: stage, JSON: data}
}

func TestLogRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l := NewLogFile(path, WithMaxSize(1), WithMaxBackups(2))
	// 2.5 MB in batches of 50 events of 10 kB: two rotations at 1 MB.
	for b := range 5 {
		var batch []audit.Encoded
		for i := range 50 {
			batch = append(batch, event(t, fmt.Sprintf("%d-%d", b, i), auditv1.StageResponseComplete, 10<<10))
		}
		if err := l.Send(context.Background(), batch); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "audit*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("files %v, want the log and two rotated ones", files)
	}
	lines := 0
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1<<20 {
			t.Errorf("%s holds %d bytes, over the 1 MB bound", f, st.Size())
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev auditv1.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Kind != "Event" {
				t.Errorf("%s: line %q is no event: %v", f, sc.Text()[:40], err)
			}
			lines++
		}
		fh.Close()
	}
	// Rotation keeps two files of old events: what is left of the 250
	// is whole lines, at least the last megabyte's.
	if lines < 100 || lines > 250 {
		t.Errorf("%d events kept, want between 100 and 250", lines)
	}
}

// webhookServer is a real HTTPS audit webhook that fails its first
// failures answers with 503, then takes EventLists.
type webhookServer struct {
	*httptest.Server
	ca []byte

	mu       sync.Mutex
	failures int
	posts    int
	lists    [][]auditv1.Event
}

func newWebhookServer(t *testing.T, failures int) *webhookServer {
	t.Helper()
	ca, err := pki.NewCA("audit-webhook-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Serving("audit-webhook", []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w := &webhookServer{ca: ca.CertPEM(), failures: failures}
	w.Server = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	w.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLSCertificate()}}
	w.StartTLS()
	t.Cleanup(w.Close)
	return w
}

func (w *webhookServer) serve(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.posts++
	if w.failures > 0 {
		w.failures--
		http.Error(rw, "try later", http.StatusServiceUnavailable)
		return
	}
	var list auditv1.EventList
	if err := json.NewDecoder(r.Body).Decode(&list); err != nil || list.Kind != "EventList" || list.APIVersion != "audit.k8s.io/v1" {
		http.Error(rw, fmt.Sprintf("not an EventList: %v", err), http.StatusBadRequest)
		return
	}
	w.lists = append(w.lists, list.Items)
}

// kubeconfig writes the kubeconfig that names w, as an operator writes
// --audit-webhook-config-file.
func (w *webhookServer) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: audit
  cluster:
    server: %s/audit
    certificate-authority-data: %s
users:
- name: gateway
  user: {token: audit-token}
contexts:
- name: audit
  context: {cluster: audit, user: gateway}
current-context: audit
`, w.URL, base64.StdEncoding.EncodeToString(w.ca))
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWebhookRetries waits kube's backoff, on a clock the test steps,
// between attempts that the webhook answers 503.
func TestWebhookRetries(t *testing.T) {
	srv := newWebhookServer(t, 2)
	clk := clocktesting.NewFakeClock(time.Now())
	w, err := NewWebhook(srv.kubeconfig(t), WithWebhookClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	batch := []audit.Encoded{event(t, "a", auditv1.StageRequestReceived, 0), event(t, "a", auditv1.StageResponseComplete, 0)}
	sent := make(chan error, 1)
	go func() { sent <- w.Send(context.Background(), batch) }()
	// Two waits: the initial backoff, then 1.5 times it, each with up
	// to a fifth more.
	for _, wait := range []time.Duration{DefaultInitialBackoff, DefaultInitialBackoff * 3 / 2} {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(wait - time.Nanosecond)
		if !clk.HasWaiters() {
			t.Fatalf("retried before %v", wait)
		}
		clk.Step(wait / 5)
	}
	if err := <-sent; err != nil {
		t.Fatalf("send after two 503s: %v", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.posts != 3 || len(srv.lists) != 1 || len(srv.lists[0]) != 2 {
		t.Fatalf("%d posts, lists %v; want three posts, the last one list of two events", srv.posts, srv.lists)
	}
	if got := srv.lists[0][1]; got.AuditID != "a" || got.Stage != auditv1.StageResponseComplete {
		t.Errorf("second event %s/%s, want a/ResponseComplete", got.AuditID, got.Stage)
	}
}

func TestWebhookGivesUp(t *testing.T) {
	srv := newWebhookServer(t, 100)
	w, err := NewWebhook(srv.kubeconfig(t), WithInitialBackoff(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	err = w.Send(context.Background(), []audit.Encoded{event(t, "a", auditv1.StageResponseComplete, 0)})
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("send to a failing webhook: %v, want its 503", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.posts != webhookAttempts {
		t.Errorf("%d posts, want %d attempts", srv.posts, webhookAttempts)
	}
}

// TestStream publishes as the gateway, with the gateway's NATS
// permissions, and reads the stream as an outside consumer does.
func TestStream(t *testing.T) {
	srv := natstest.StartWithAccess(t)
	s, err := NewStream(srv.ConnectAs(t, access.Gateway))
	if err != nil {
		t.Fatal(err)
	}
	batch := []audit.Encoded{
		event(t, "a", auditv1.StageRequestReceived, 0),
		event(t, "a", auditv1.StageResponseComplete, 0),
		event(t, "b", auditv1.StageResponseComplete, 0),
	}
	ctx := context.Background()
	if err := s.Send(ctx, batch); err != nil {
		t.Fatalf("send: %v", err)
	}
	// A batch sent again after a lost acknowledgement is not stored
	// twice.
	if err := s.Send(ctx, batch[1:]); err != nil {
		t.Fatalf("send again: %v", err)
	}
	stream, err := srv.JetStream(t).Stream(ctx, auditstream.StreamName)
	if err != nil {
		t.Fatalf("open the stream: %v", err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{auditstream.Subject("ResponseComplete")}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		var ev auditv1.Event
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.AuditID)+"/"+string(ev.Stage)+" "+msg.Headers().Get(auditstream.HeaderMsgID))
	}
	want := []string{"a/ResponseComplete a/ResponseComplete", "b/ResponseComplete b/ResponseComplete"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events %v, want %v", got, want)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 {
		t.Errorf("stream holds %d messages, want 3: a repeat was stored", info.State.Msgs)
	}
}
