//go:build !linux

package proxy

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: the
// keepalive probes alone find a silent replica, once its connection is
// idle.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }
