package tracing

import (
	"net/textproto"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// NATSHeader carries trace context in a NATS message's headers. NATS
// keeps the case of header names (nats.Header is case-sensitive, unlike
// http.Header), so the W3C names are written as the specification spells
// them and read in either that spelling or Go's canonical one, which an
// http.Header turned into a nats.Header carries.
func NATSHeader(h nats.Header) propagation.TextMapCarrier { return natsCarrier(h) }

type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	return nats.Header(c).Get(textproto.CanonicalMIMEHeaderKey(key))
}

func (c natsCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
