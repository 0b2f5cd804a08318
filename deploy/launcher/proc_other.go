//go:build !linux

package launcher

import "syscall"

// childAttributes puts a service in a process group of its own, so that
// a terminal's Ctrl-C reaches only the launcher, which stops the services
// in order.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
