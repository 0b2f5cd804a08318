package filters_test

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/services/gateway/internal/filters"
)

func TestAddFlags(t *testing.T) {
	c := filters.DefaultConfig()
	fs := pflag.NewFlagSet("gateway", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--max-requests-inflight=7", "--max-mutating-requests-inflight=3", "--request-timeout=5s",
		"--max-resource-write-bytes=1024", "--max-long-running-requests-per-user=9", "--shutdown-delay-duration=2s", "--access-log-level=debug"}); err != nil {
		t.Fatalf("parse flags: %v", err)
	}
	want := filters.Config{MaxRequestsInFlight: 7, MaxMutatingRequestsInFlight: 3, RequestTimeout: 5 * time.Second,
		MaxRequestBodyBytes: 1024, MaxLongRunningRequestsPerUser: 9, ShutdownDelay: 2 * time.Second, ShutdownTimeout: filters.DefaultShutdownTimeout, AccessLogLevel: "debug"}
	if c != want {
		t.Errorf("config = %+v, want %+v", c, want)
	}
	d := filters.DefaultConfig()
	if d.MaxRequestsInFlight != 400 || d.MaxMutatingRequestsInFlight != 200 || d.RequestTimeout != time.Minute || d.MaxRequestBodyBytes != 3145728 || filters.MaxHeaderBytes != 1<<20 {
		t.Errorf("defaults = %+v, MaxHeaderBytes %d; want kube's", d, filters.MaxHeaderBytes)
	}
}
