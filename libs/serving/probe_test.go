package serving_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"kplane.dev/libs/healthz"
	"kplane.dev/libs/pki"
	"kplane.dev/libs/serving"
)

// TestProbe probes a replica as its image's health check does: with the
// replica's own flags, ready then shutting down; and refuses a replica
// serving another certificate than its flags name.
func TestProbe(t *testing.T) {
	f := newFiles(t)
	o := f.options(required)
	o.ShutdownDelay = 2 * time.Second
	url, stop, _ := start(t, o, func(sd *serving.Shutdown) http.Handler {
		return healthz.Handler("readyz", healthz.Ping(), sd.Check())
	})
	probed := o
	probed.ListenAddress = "0.0.0.0:" + url[strings.LastIndex(url, ":")+1:]
	if err := probed.Probe(context.Background()); err != nil {
		t.Fatalf("probe of a ready replica on a wildcard address: %v", err)
	}

	other := pki.Dir{Path: t.TempDir()}
	ca, err := other.CA("ca", "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Serving(ca, "serving", "localhost", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	impostor := probed
	impostor.TLSCertFile = other.Files("serving").Cert
	if err := impostor.Probe(context.Background()); err == nil || !strings.Contains(err.Error(), "another certificate") {
		t.Errorf("probe expecting another certificate: %v, want refused", err)
	}

	go func() { _ = stop() }()
	deadline := time.Now().Add(10 * time.Second)
	for probed.Probe(context.Background()) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the probe still passes after shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}

	zero := o
	if err := zero.Probe(context.Background()); err == nil {
		t.Error("probed a replica on port 0")
	}
}
