package natsrpc_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	"kplane.dev/libs/pki"
	"kplane.dev/proto/access"
	"kplane.dev/proto/authn"
)

// TestConnectAsService checks that a service connected with its key gets
// replies under its own permissions: its inbox is the only one it may
// read.
func TestConnectAsService(t *testing.T) {
	srv := natstest.StartWithAccess(t)
	// A slow review: the acknowledgement and heartbeats before the reply
	// must reach the requester under the permissions too.
	if err := natsrpc.NewServer(srv.ConnectAs(t, access.Authn), slog.New(slog.DiscardHandler)).Handle(authn.SubjectTokenReview, authn.QueueGroup, func(_ context.Context, p []byte) ([]byte, error) {
		time.Sleep(1500 * time.Millisecond)
		return append([]byte("reviewed:"), p...), nil
	}); err != nil {
		t.Fatal(err)
	}
	o := srv.ConnOptions(access.Gateway)
	if errs := o.Validate(true); len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	gw, _ := access.Lookup(access.Gateway)
	nc, err := o.Connect(gw.ClientName())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if inbox := nc.NewInbox(); !strings.HasPrefix(inbox, gw.InboxPrefix()+".") {
		t.Errorf("inbox %q is not below %s", inbox, gw.InboxPrefix())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := natsrpc.Request(ctx, nc, authn.SubjectTokenReview, []byte("t"))
	if err != nil || string(got) != "reviewed:t" {
		t.Fatalf("token review as the gateway = %q, %v", got, err)
	}
}

func TestConnectUnknownService(t *testing.T) {
	o := natsrpc.ConnOptions{URL: natstest.Start(t).URL}
	if _, err := o.Connect("kplane-nobody"); err == nil {
		t.Fatal("connected as a service kplane.dev/proto/access does not know")
	}
}

// TestConnectToken checks both places a token may come from, and that it
// is the token the server checks.
func TestConnectToken(t *testing.T) {
	const token = "s3cret-token"
	srv := natstest.Start(t, func(o *server.Options) { o.Authorization = token })
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrong, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		file    string
		env     string
		wantErr bool
	}{
		{name: "from a file", file: file},
		{name: "from the environment", env: token},
		{name: "a wrong token", file: wrong, wantErr: true},
		{name: "none", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(natsrpc.EnvToken, tt.env)
			o := natsrpc.ConnOptions{URL: srv.URL, TokenFile: tt.file}
			nc, err := o.Connect("kplane-core", nats.RetryOnFailedConnect(false))
			if err == nil {
				nc.Close()
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("Connect error = %v, want an error: %v", err, tt.wantErr)
			}
		})
	}
}

func TestConnValidate(t *testing.T) {
	tests := []struct {
		name string
		o    natsrpc.ConnOptions
		env  string
		want []string
	}{
		{name: "a key", o: natsrpc.ConnOptions{URL: "nats://n", NKeyFile: "k"}},
		{name: "a key and a token in the environment", o: natsrpc.ConnOptions{URL: "nats://n", NKeyFile: "k"}, env: "t", want: []string{"--nats-nkey-file, KPLANE_NATS_TOKEN"}},
		{name: "a key and a token file", o: natsrpc.ConnOptions{URL: "nats://n", NKeyFile: "k", TokenFile: "t"}, want: []string{"--nats-nkey-file, --nats-token-file"}},
		{name: "credentials without a URL", o: natsrpc.ConnOptions{Creds: "c"}, want: []string{"--nats-creds need --nats-url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(natsrpc.EnvToken, tt.env)
			errs := tt.o.Validate(false)
			if len(errs) != len(tt.want) {
				t.Fatalf("Validate = %v, want %q", errs, tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], w)
				}
			}
		})
	}
}

// TestConnectTLS connects to a NATS server that serves TLS and verifies
// client certificates: with the CA and a client certificate the service
// gets in; without the CA it does not trust the server, and without a
// certificate the server does not admit it.
func TestConnectTLS(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("nats-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving("nats", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("kplane-core", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.crt", ca.CertPEM())
	certFile := write("client.crt", client.CertPEM())
	key, err := client.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := write("client.key", key)
	srv := natstest.Start(t, func(o *server.Options) {
		o.TLSConfig = &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{serving.TLSCertificate()},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    ca.Pool(),
		}
		o.TLS, o.TLSVerify = true, true
	})
	core, _ := access.Lookup(access.Core)
	connect := func(o natsrpc.ConnOptions) error {
		if errs := o.Validate(true); len(errs) > 0 {
			return errors.Join(errs...)
		}
		nc, err := o.Connect(core.ClientName(), nats.RetryOnFailedConnect(false), nats.Timeout(5*time.Second))
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	}
	if err := connect(natsrpc.ConnOptions{URL: srv.URL, CAFile: caFile, CertFile: certFile, KeyFile: keyFile}); err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	if err := connect(natsrpc.ConnOptions{URL: srv.URL, CertFile: certFile, KeyFile: keyFile}); err == nil {
		t.Error("connected without trusting the server's CA")
	}
	if err := connect(natsrpc.ConnOptions{URL: srv.URL, CAFile: caFile}); err == nil {
		t.Error("connected without a client certificate to a server that requires one")
	}
	if errs := (&natsrpc.ConnOptions{URL: srv.URL, CertFile: certFile}).Validate(true); len(errs) != 1 {
		t.Errorf("a client certificate without its key: Validate = %v, want one error", errs)
	}
	if errs := (&natsrpc.ConnOptions{CAFile: caFile}).Validate(false); len(errs) != 1 || !strings.Contains(errs[0].Error(), "--nats-ca-file need --nats-url") {
		t.Errorf("a CA without a URL: Validate = %v", errs)
	}
}
