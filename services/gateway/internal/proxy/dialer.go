package proxy

import (
	"net"
	"time"
)

// Dead-peer detection on connections to replicas. A replica cut off the
// network leaves its connections open and silent. HTTP/2 pings find
// that on the watch connections; on HTTP/1.1 the kernel does, by these
// bounds. A connection waiting for an answer, or idle in the pool, is
// probed after keepAliveIdle of silence and dropped when probes go
// unanswered. Data sent and not acknowledged within userTimeout drops it
// as well (Linux). Either way the request on it fails within about
// 20 seconds, as with the pings, and not after TCP's minutes of
// retransmissions. An idempotent request then moves on to the next
// replica.
const (
	keepAliveIdle     = 10 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 2
	userTimeout       = 20 * time.Second
	dialTimeout       = 10 * time.Second
)

// dialer dials replicas with those bounds.
func dialer() *net.Dialer {
	return &net.Dialer{
		Timeout: dialTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     keepAliveIdle,
			Interval: keepAliveInterval,
			Count:    keepAliveCount,
		},
		Control: setUserTimeout,
	}
}
