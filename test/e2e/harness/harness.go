package harness

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kplane.dev/deploy/launcher"
	"kplane.dev/libs/apiserver/frontproxy"
)

// Timeouts of the harness; generous because the machine may be busy
// building other things.
const (
	readyTimeout = 2 * time.Minute
	stopTimeout  = time.Minute
	pollInterval = 50 * time.Millisecond
	// logTail is how much of each log is printed when a test fails: short,
	// so that the failure itself, printed before the logs, stays within what
	// a CI summary shows of the output's end.
	logTail = 4 << 10
)

// System is a kplane started by kplane-up for one test.
type System struct {
	// DataDir is the launcher's data directory.
	DataDir string
	// Kubeconfig is the admin kubeconfig's path; empty when the gateway
	// does not run.
	Kubeconfig string
	// Ports are the services' ports by name, and "etcd" and "nats"; with
	// several core replicas, "core" is the first's and each replica's
	// port is under its name ("core-0", "core-1", ...).
	Ports map[string]int

	services []string
	// path and args run kplane-up; cmd is the running one.
	path    string
	args    []string
	cmd     *exec.Cmd
	output  *lockedBuffer
	exited  chan error // receives the launcher's exit once
	exitErr error
	done    bool
	// url is the gateway's URL of a system the test did not start.
	url string
}

// ExternalEnv names an admin kubeconfig of a kplane already running (in
// containers, say): Start then drives it instead of starting one, and
// tests that need the processes are skipped.
const ExternalEnv = "KPLANE_E2E_KUBECONFIG"

// external returns the system ExternalEnv names, or nil.
func external(t testing.TB) *System {
	t.Helper()
	kc := os.Getenv(ExternalEnv)
	if kc == "" {
		return nil
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatalf("load %s: %v", ExternalEnv, err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.Clusters[ctx.Cluster] == nil {
		t.Fatalf("%s has no current cluster", kc)
	}
	cluster := cfg.Clusters[ctx.Cluster]
	s := &System{DataDir: t.TempDir(), Kubeconfig: kc, Ports: map[string]int{}, output: &lockedBuffer{}, url: cluster.Server, done: true}
	if err := os.MkdirAll(filepath.Join(s.DataDir, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.CAFile(), cluster.CertificateAuthorityData, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// Option changes how Start runs the system.
type Option func(*settings)

type settings struct {
	services []string
	// replicas are the processes of scalable services, by name.
	replicas map[string]int
	// args are extra arguments of services, by name (kplane-up
	// --<name>-arg).
	args map[string][]string
	// launcher are arguments of kplane-up itself.
	launcher []string
}

// WithServices runs only the services called names (kplane-up
// --services), for tests of the launcher or of one service.
func WithServices(names ...string) Option {
	return func(s *settings) { s.services = names }
}

// WithCoreReplicas runs n core processes (kplane-up --core-replicas),
// named core-0, core-1, ... for PID, KillService and RestartService when
// n > 1; the gateway sends to all of them.
func WithCoreReplicas(n int) Option { return WithReplicas("core", n) }

// WithReplicas runs n processes of the scalable service called name,
// named <name>-0, <name>-1, ... when n > 1.
func WithReplicas(name string, n int) Option {
	return func(s *settings) { s.replicas[name] = n }
}

// WithArgs appends args to the arguments of the service called name.
func WithArgs(name string, args ...string) Option {
	return func(s *settings) { s.args[name] = append(s.args[name], args...) }
}

// WithTracing sends every service's traces to the OTLP receiver at
// endpoint over protocol (kplane-up --tracing-*), sampling perMillion of
// the traces a service starts; a caller's sampled trace is always
// followed.
func WithTracing(endpoint, protocol string, perMillion int) Option {
	return func(s *settings) {
		s.launcher = append(s.launcher, "--tracing-endpoint="+endpoint, "--tracing-protocol="+protocol, "--tracing-sampling-rate-per-million="+strconv.Itoa(perMillion))
	}
}

// Start runs kplane-up on a temporary data directory and free ports, waits
// until every service is ready, and stops it when the test ends.
func Start(t testing.TB, opts ...Option) *System {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the whole system")
	}
	set := settings{replicas: map[string]int{}, args: map[string][]string{}}
	for _, o := range opts {
		o(&set)
	}
	if ext := external(t); ext != nil {
		if len(set.services) > 0 || len(set.replicas) > 0 || len(set.args) > 0 || len(set.launcher) > 0 {
			t.Skip("needs a system started its own way; " + ExternalEnv + " names one already running")
		}
		return ext
	}
	all := launcher.Services()
	var run []launcher.Service
	for _, s := range all {
		if len(set.services) == 0 || slices.Contains(set.services, s.Name) {
			run = append(run, s)
		}
	}
	bin, err := binaries()
	if err != nil {
		t.Fatalf("build kplane: %v", err)
	}

	s := &System{
		DataDir: t.TempDir(),
		Ports:   map[string]int{},
		output:  &lockedBuffer{},
	}
	args := append([]string{"--data-dir=" + s.DataDir, "--bin-dir=" + bin, "--stop-grace=20s"}, set.launcher...)
	// Every service gets a free port, running or not, so that no default
	// port of a developer's own make up is touched.
	names := []string{"etcd", "nats"}
	sizes := []int{1, 1}
	replicas := map[string]int{}
	for _, svc := range all {
		names = append(names, svc.Name)
		replicas[svc.Name] = max(set.replicas[svc.Name], 1)
		if replicas[svc.Name] != 1 {
			args = append(args, fmt.Sprintf("--%s-replicas=%d", svc.Name, replicas[svc.Name]))
		}
		for _, a := range set.args[svc.Name] {
			args = append(args, fmt.Sprintf("--%s-arg=%s", svc.Name, a))
		}
		sizes = append(sizes, replicas[svc.Name])
	}
	ports := freePorts(t, sizes)
	for i, name := range names {
		s.Ports[name] = ports[i]
		args = append(args, fmt.Sprintf("--%s-port=%d", name, ports[i]))
		for r := range sizes[i] {
			s.Ports[launcher.ReplicaName(name, r, sizes[i])] = ports[i] + r
		}
	}
	for _, svc := range run {
		for r := range replicas[svc.Name] {
			s.services = append(s.services, launcher.ReplicaName(svc.Name, r, replicas[svc.Name]))
		}
		if svc.Name == launcher.PublicService {
			s.Kubeconfig = filepath.Join(s.DataDir, launcher.KubeconfigFile)
		}
	}
	var only []string
	for _, svc := range run {
		only = append(only, svc.Name)
	}
	args = append(args, "--services="+strings.Join(only, ","))

	s.path, s.args = filepath.Join(bin, launcherBinary), args
	t.Cleanup(func() {
		s.Stop(t)
		if t.Failed() {
			s.dumpLogs(t)
		}
	})
	s.launch(t)
	return s
}

// launch runs kplane-up and waits until every service is ready.
func (s *System) launch(t testing.TB) {
	t.Helper()
	s.cmd = exec.Command(s.path, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	// Environment that would point the launcher elsewhere is not the
	// test's.
	s.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, launcher.EnvEtcdServers+"=") || strings.HasPrefix(kv, launcher.EnvNATSURL+"=") || strings.HasPrefix(kv, launcher.EnvNATSToken+"=")
	})
	s.exited, s.exitErr, s.done = make(chan error, 1), nil, false
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start kplane-up: %v", err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	s.waitReady(t)
}

// Relaunch stops kplane-up as Ctrl-C does and runs it again on the same
// data directory and ports, as a user running make up twice.
func (s *System) Relaunch(t testing.TB) {
	t.Helper()
	if s.url != "" {
		t.Skip("needs a system the test started")
	}
	s.Stop(t)
	fmt.Fprintf(s.output, "==== harness: relaunching kplane-up\n")
	s.launch(t)
}

// waitReady waits until every service has a pid file, which the launcher
// writes once the service's /readyz passed.
func (s *System) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		missing := ""
		for _, name := range s.services {
			if _, err := s.pid(name); err != nil {
				missing = name
				break
			}
		}
		if missing == "" {
			return
		}
		if s.launcherExited() {
			t.Fatalf("kplane-up exited before %s was ready: %v", missing, s.exitErr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v", missing, readyTimeout)
		}
		time.Sleep(pollInterval)
	}
}

// launcherExited says whether kplane-up has exited, recording how.
func (s *System) launcherExited() bool {
	if s.done {
		return true
	}
	select {
	case err := <-s.exited:
		s.exitErr, s.done = err, true
		return true
	default:
		return false
	}
}

// Stop stops kplane-up as Ctrl-C does and fails the test if it does not
// exit cleanly or leaves a service process behind. Stopping twice does
// nothing.
func (s *System) Stop(t testing.TB) {
	t.Helper()
	if s.launcherExited() {
		return
	}
	var pids []int
	for _, name := range s.services {
		if pid, err := s.pid(name); err == nil {
			pids = append(pids, pid)
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("signal kplane-up: %v", err)
	}
	select {
	case err := <-s.exited:
		s.exitErr, s.done = err, true
		if err != nil {
			t.Errorf("kplane-up exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		s.exitErr, s.done = <-s.exited, true
		t.Errorf("kplane-up still running %v after SIGTERM", stopTimeout)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("service process %d still runs after kplane-up stopped", pid)
		}
	}
}

// PID is the pid of the ready process of the service called name.
func (s *System) PID(t testing.TB, name string) int {
	t.Helper()
	if s.url != "" {
		t.Skip("needs the processes of a system the test started")
	}
	pid, err := s.pid(name)
	if err != nil {
		t.Fatalf("pid of %s: %v", name, err)
	}
	return pid
}

// Log is what the process called name (a service, etcd or nats) has
// logged so far.
func (s *System) Log(t testing.TB, name string) string {
	t.Helper()
	if s.url != "" {
		t.Skip("needs the logs of a system the test started")
	}
	b, err := os.ReadFile(launcher.LogFile(s.DataDir, name))
	if err != nil {
		t.Fatalf("log of %s: %v", name, err)
	}
	return string(b)
}

func (s *System) pid(name string) (int, error) {
	b, err := os.ReadFile(launcher.PIDFile(s.DataDir, name))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// KillService kills the process of the service called name with SIGKILL,
// as a crash would, and waits until the launcher has started a new one and
// it is ready. It returns the new pid.
func (s *System) KillService(t testing.TB, name string) int {
	t.Helper()
	return s.signalService(t, name, syscall.SIGKILL)
}

// RestartService stops the process of the service called name with
// SIGTERM, as a rolling restart would, and waits until the launcher has
// started a new one and it is ready. It returns the new pid.
func (s *System) RestartService(t testing.TB, name string) int {
	t.Helper()
	return s.signalService(t, name, syscall.SIGTERM)
}

func (s *System) signalService(t testing.TB, name string, sig syscall.Signal) int {
	t.Helper()
	old := s.PID(t, name)
	if err := syscall.Kill(old, sig); err != nil {
		t.Fatalf("signal %s (pid %d): %v", name, old, err)
	}
	return s.WaitReplaced(t, name, old)
}

// WaitReplaced waits until the launcher has started a process of the
// service called name other than pid and it is ready, and returns its pid;
// tests that signal a process themselves, to keep working while it is
// down, wait with it.
func (s *System) WaitReplaced(t testing.TB, name string, pid int) int {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		if p, err := s.pid(name); err == nil && p != pid {
			return p
		}
		if s.launcherExited() {
			t.Fatalf("kplane-up exited while %s (pid %d) was being replaced: %v", name, pid, s.exitErr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) not replaced by a ready process after %v", name, pid, readyTimeout)
		}
		time.Sleep(pollInterval)
	}
}

// RESTConfig is the admin's client-go configuration, read from the admin
// kubeconfig.
func (s *System) RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	if s.Kubeconfig == "" {
		t.Fatal("no admin kubeconfig: the gateway does not run")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatalf("load admin kubeconfig: %v", err)
	}
	return cfg
}

// CoreConfig is a client-go configuration that talks to core directly as
// the gateway does: with the gateway's front-proxy client certificate,
// naming the admin in identity headers. It measures what the gateway's hop
// costs, and reaches core when the gateway does not run.
func (s *System) CoreConfig(t testing.TB) *rest.Config {
	t.Helper()
	if s.url != "" {
		t.Skip("needs core's own port, which a system the test did not start does not publish")
	}
	pkiDir := filepath.Join(s.DataDir, "pki")
	return &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(s.Ports["core"]),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   filepath.Join(pkiDir, "ca.crt"),
			CertFile: filepath.Join(pkiDir, frontproxy.ClientName+".crt"),
			KeyFile:  filepath.Join(pkiDir, frontproxy.ClientName+".key"),
		},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return identity{next: rt}
		},
	}
}

// identity sets the admin's identity headers, as the gateway does.
type identity struct{ next http.RoundTripper }

func (i identity) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(frontproxy.UserHeader, launcher.AdminUser)
	r.Header.Set(frontproxy.GroupHeader, launcher.AdminGroup)
	return i.next.RoundTrip(r)
}

// Kubectl runs the machine's kubectl with the admin kubeconfig; the test
// is skipped when there is no kubectl.
func (s *System) Kubectl(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if s.Kubeconfig == "" {
		t.Fatal("no admin kubeconfig: the gateway does not run")
	}
	return s.kubectl(t, s.Kubeconfig, args...)
}

// KubectlToken runs the machine's kubectl with a kubeconfig that holds
// only the gateway's address and CA, and token as its bearer token
// (anonymous when token is empty): no client certificate that would win
// over the token.
func (s *System) KubectlToken(t testing.TB, token string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	path := filepath.Join(s.DataDir, "token.kubeconfig")
	if _, statErr := os.Stat(path); statErr != nil {
		const name = "kplane"
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: s.URL(), CertificateAuthority: s.CAFile()}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
		cfg.CurrentContext = name
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatalf("write token kubeconfig: %v", err)
		}
	}
	if token != "" {
		args = append([]string{"--token=" + token}, args...)
	}
	return s.kubectl(t, path, args...)
}

// URL is the gateway's URL.
func (s *System) URL() string {
	if s.url != "" {
		return s.url
	}
	return "https://127.0.0.1:" + strconv.Itoa(s.Ports[launcher.PublicService])
}

// CAFile is the cluster CA's certificate file.
func (s *System) CAFile() string { return filepath.Join(s.DataDir, "pki", "ca.crt") }

// TokenConfig is a client-go configuration for the gateway with token as
// its only credential.
func (s *System) TokenConfig(token string) *rest.Config {
	return &rest.Config{Host: s.URL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: s.CAFile()}}
}

func (s *System) kubectl(t testing.TB, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	kubectl, lookErr := exec.LookPath("kubectl")
	if lookErr != nil {
		t.Skip("kubectl is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	// kubectl's cache of discovery lives with the test, not the user.
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(s.DataDir, "kubectl-cache"), "HOME="+s.DataDir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// dumpLogs prints the launcher's output and the end of every log.
func (s *System) dumpLogs(t testing.TB) {
	t.Helper()
	t.Logf("==== kplane-up output\n%s", s.output.String())
	logs, _ := filepath.Glob(filepath.Join(s.DataDir, "logs", "*.log"))
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Logf("==== %s: %v", f, err)
			continue
		}
		if len(b) > logTail {
			b = b[len(b)-logTail:]
		}
		t.Logf("==== %s\n%s", filepath.Base(f), b)
	}
}

// freePorts returns, for each size, the first of that many consecutive
// ports nothing listens on at the moment: all are held open until all are
// found, so the blocks are distinct.
func freePorts(t testing.TB, sizes []int) []int {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, len(sizes))
	for _, n := range sizes {
		block, err := freeBlock(n)
		if err != nil {
			t.Fatalf("find %d free consecutive ports: %v", n, err)
		}
		held = append(held, block...)
		ports = append(ports, block[0].Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// Ports are chosen below the kernel's ephemeral range (Linux's default
// starts at 32768). A port from that range, free while a killed process is
// down, may meanwhile become the source port of a connection (the
// gateway's own dial to the dead replica can even connect to itself) or
// the port the kernel hands another test's listener, and the restarted
// process then fails with "address already in use".
const (
	lowestPort    = 10000
	ephemeralFile = "/proc/sys/net/ipv4/ip_local_port_range"
)

// portCeiling is the first port of the kernel's ephemeral range, or 0 when
// it is unknown or leaves too few ports below it, and the kernel picks.
func portCeiling() int {
	b, err := os.ReadFile(ephemeralFile)
	if err != nil {
		return 0
	}
	low, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\t")
	p, err := strconv.Atoi(strings.TrimSpace(low))
	if err != nil || p < lowestPort+1000 {
		return 0
	}
	return p
}

// freeBlock listens on n consecutive ports, the first chosen at random
// below the ephemeral range (by the kernel when there is none); it tries
// again from another when a following port is taken.
func freeBlock(n int) ([]net.Listener, error) {
	const attempts = 100
	ceiling := portCeiling()
	for range attempts {
		addr := "127.0.0.1:0"
		if ceiling > 0 {
			addr = "127.0.0.1:" + strconv.Itoa(lowestPort+rand.IntN(ceiling-lowestPort-n))
		}
		first, err := net.Listen("tcp", addr)
		if err != nil {
			if ceiling > 0 {
				continue
			}
			return nil, err
		}
		block := []net.Listener{first}
		port := first.Addr().(*net.TCPAddr).Port
		for i := 1; i < n; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+i))
			if err != nil {
				break
			}
			block = append(block, l)
		}
		if len(block) == n {
			return block, nil
		}
		for _, l := range block {
			_ = l.Close()
		}
	}
	return nil, fmt.Errorf("no block after %d attempts", attempts)
}

// lockedBuffer collects a process's output written from its own
// goroutines while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
