// Package harness starts a whole kplane for end-to-end tests exactly as
// `make up` does: it builds the launcher and the service binaries once per
// test binary, runs the launcher (kplane-up) as a process on a temporary
// data directory and free ports, and hands tests the admin kubeconfig, a
// client-go configuration, the machine's stock kubectl, and ways to kill
// or restart one service process. When a test fails, the launcher's output
// and every process's log are printed.
//
// A test package calls Main from its TestMain, which removes the built
// binaries at the end.
package harness
