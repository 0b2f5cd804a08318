//go:build !linux

package proxy

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not there: the
// keep-alive probes still find a silent replica.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }
