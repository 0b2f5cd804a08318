package proxy

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// setUserTimeout makes the kernel drop the connection when data it sent
// stays unacknowledged for userTimeout, or keepalive probes go unanswered
// that long, instead of retransmitting for a quarter of an hour.
func setUserTimeout(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout.Milliseconds()))
	})
	return errors.Join(err, serr)
}
