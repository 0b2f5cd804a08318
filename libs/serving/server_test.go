package serving_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"kplane.dev/libs/healthz"
	"kplane.dev/libs/pki"
	"kplane.dev/libs/serving"
)

// files are a CA, a serving certificate it issued and a client
// certificate it issued, on disk as the flags name them.
type files struct {
	ca      *pki.Cert
	serving pki.Files
	client  tls.Certificate
}

func newFiles(t *testing.T) *files {
	t.Helper()
	dir := pki.Dir{Path: t.TempDir()}
	ca, err := dir.CA("ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.Serving(ca, "serving", "localhost", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("alice", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &files{ca: ca, serving: dir.Files("serving"), client: client.TLSCertificate()}
}

func (f *files) options(s serving.Service) serving.Options {
	o := serving.NewOptions(s)
	o.ListenAddress = "127.0.0.1:0"
	o.TLSCertFile, o.TLSPrivateKeyFile = f.serving.Cert, f.serving.Key
	o.ClientCAFile = f.serving.Cert[:len(f.serving.Cert)-len("serving.crt")] + "ca.crt"
	return o
}

// start serves handler with the server the options configure until the
// test ends.
func start(t *testing.T, o serving.Options, handler func(*serving.Shutdown) http.Handler) (url string, stop func() error, sd *serving.Shutdown) {
	t.Helper()
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	cfg, err := o.Config(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := cfg.Listen()
	if err != nil {
		t.Fatal(err)
	}
	sd = cfg.NewShutdown(nil)
	srv := cfg.NewServer(handler(sd))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serving.Serve(ctx, srv, ln, cfg.Log, sd.Run) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { _ = stop() })
	return "https://" + ln.Addr().String(), stop, sd
}

func TestServesTLSWithAndWithoutClientCertificate(t *testing.T) {
	f := newFiles(t)
	// whoami answers who the client certificate the CA verifies names.
	whoami := func(*serving.Shutdown) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(r.TLS.PeerCertificates) == 0 {
				fmt.Fprint(w, "nobody")
				return
			}
			leaf := r.TLS.PeerCertificates[0]
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: f.ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			fmt.Fprint(w, leaf.Subject.CommonName)
		})
	}
	url, _, _ := start(t, f.options(required), whoami)
	other, err := pki.NewCA("other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Client("mallory", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		certs    []tls.Certificate
		maxTLS   uint16
		wantCode int
		wantBody string
		wantErr  string
	}{
		{name: "client certificate of the CA", certs: []tls.Certificate{f.client}, wantCode: 200, wantBody: "alice"},
		{name: "no client certificate", wantCode: 200, wantBody: "nobody"},
		// The handshake names the CA, so the client keeps a certificate
		// of another to itself rather than failing the handshake.
		{name: "client certificate of another CA", certs: []tls.Certificate{stranger.TLSCertificate()}, wantCode: 200, wantBody: "nobody"},
		{name: "TLS 1.1", maxTLS: tls.VersionTLS11, wantErr: "protocol version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs:      f.ca.Pool(),
				Certificates: tt.certs,
				MinVersion:   tls.VersionTLS10,
				MaxVersion:   tt.maxTLS,
			}}}
			defer client.CloseIdleConnections()
			resp, err := client.Get(url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode || string(body) != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestShutdown(t *testing.T) {
	f := newFiles(t)
	o := f.options(required)
	o.ShutdownDelay = 500 * time.Millisecond
	url, stop, _ := start(t, o, func(sd *serving.Shutdown) http.Handler {
		return healthz.Handler("readyz", healthz.Ping(), sd.Check())
	})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()}}}
	defer client.CloseIdleConnections()
	ready := func() (int, error) {
		resp, err := client.Get(url + "/readyz")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := ready(); err != nil || code != http.StatusOK {
		t.Fatalf("before shutdown: %d, %v; want 200", code, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// Unready, and still serving, during the delay.
	deadline := time.Now().Add(o.ShutdownDelay)
	for {
		code, err := ready()
		if err != nil {
			t.Fatalf("during the delay: %v", err)
		}
		if code == http.StatusInternalServerError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still ready (%d) at the end of the delay", code)
		}
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve = %v, want nil after a graceful shutdown", err)
	}
	client.CloseIdleConnections()
	if _, err := ready(); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

func TestServeReportsShutdownTimeout(t *testing.T) {
	f := newFiles(t)
	o := f.options(required)
	o.ShutdownTimeout = 100 * time.Millisecond
	inFlight := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	url, stop, _ := start(t, o, func(*serving.Shutdown) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(inFlight)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
	})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()}}}
	defer client.CloseIdleConnections()
	go func() {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
		}
	}()
	<-inFlight
	if err := stop(); err == nil || !strings.Contains(err.Error(), "requests still in flight at the shutdown timeout") {
		t.Fatalf("Serve = %v, want the shutdown timeout reported", err)
	}
}
