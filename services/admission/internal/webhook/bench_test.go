package webhook

import (
	"context"
	"testing"
)

// BenchmarkValidateOneWebhook is one write past one validating webhook
// that allows it, over HTTPS on loopback: what admission adds to a write
// besides the webhook's own work (go test -bench OneWebhook).
func BenchmarkValidateOneWebhook(b *testing.B) {
	s := startServer(b, allow)
	d := dispatcher(b, validatingConfigs(validating("bench.example.com", s, nil)))
	a := createPod(pod(nil))
	for b.Loop() {
		if _, err := d.Validate(context.Background(), a); err != nil {
			b.Fatal(err)
		}
	}
}
