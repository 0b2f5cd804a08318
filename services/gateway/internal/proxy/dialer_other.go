//go:build !linux

package proxy

import (
	"net"
	"syscall"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not there: the
// keep-alive probes still find a silent replica.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }

// closedByPeer cannot tell without waiting here; a request on a
// connection the replica closed fails, and a get is sent again.
func closedByPeer(net.Conn) bool { return false }
