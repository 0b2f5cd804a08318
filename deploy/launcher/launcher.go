package launcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kplane.dev/libs/natsauth"
	"kplane.dev/proto/access"
)

// Paths in the data directory.
const (
	pkiDir         = "pki"
	etcdDir        = "etcd"
	natsDir        = "nats"
	logsDir        = "logs"
	runDir         = "run"
	launcherPID    = "kplane-up.pid"
	KubeconfigFile = "admin.kubeconfig"
	// PoliciesDir holds operator Rego policies that authz loads and
	// reloads on change.
	PoliciesDir = "policies"
	// AdmissionPoliciesDir holds operator Rego policies that admission
	// loads and reloads on change.
	AdmissionPoliciesDir = "admission-policies"
	// NATSAuthDir holds the services' NKey seeds and the NATS server's
	// configuration (kplane.dev/libs/natsauth).
	NATSAuthDir = "nats-auth"
	// oldNATSToken is the token every service shared before each had a
	// key: removed, it grants nothing any more.
	oldNATSToken = "nats.token"
)

// ServiceKubeconfig is the kubeconfig of the service called name, for a
// service with an Identity.
func ServiceKubeconfig(dataDir, name string) string {
	return filepath.Join(dataDir, name+".kubeconfig")
}

// PIDFile is the file holding the pid of the service called name while
// a process of it runs and has been ready; tests read it to kill one.
func PIDFile(dataDir, name string) string {
	return filepath.Join(dataDir, runDir, name+".pid")
}

// LogFile is the log of the process called name (a service, etcd or
// nats).
func LogFile(dataDir, name string) string {
	return filepath.Join(dataDir, logsDir, name+".log")
}

// NATSAuth makes or refreshes the NATS credentials of the installation in
// dataDir: a key per service (kept if present) and the server's
// configuration, in NATSAuthDir. Run calls it; `kplane-up nats-auth` calls
// it alone, for a NATS server the launcher does not run.
func NATSAuth(dataDir string) (natsauth.Files, error) {
	if err := os.Remove(filepath.Join(dataDir, oldNATSToken)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return natsauth.Files{}, fmt.Errorf("remove the old shared NATS token: %w", err)
	}
	return natsauth.Ensure(filepath.Join(dataDir, NATSAuthDir), access.Services())
}

// Run starts the installation cfg describes and keeps it running until
// ctx ends or a service keeps failing; then it stops every service in
// reverse order, then NATS, then etcd.
func Run(ctx context.Context, cfg *Config) error {
	if cfg.procs > 0 {
		// The embedded etcd and NATS share the CPUs like a service.
		runtime.GOMAXPROCS(cfg.procs)
	}
	for _, d := range []string{cfg.dataDir, filepath.Join(cfg.dataDir, logsDir), filepath.Join(cfg.dataDir, runDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		// A directory made by an earlier version may be open to others.
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("restrict %s: %w", d, err)
		}
	}
	release, err := claim(filepath.Join(cfg.dataDir, launcherPID))
	if err != nil {
		return err
	}
	defer release()

	certs, err := issue(filepath.Join(cfg.dataDir, pkiDir), cfg.services, nil)
	if err != nil {
		return err
	}
	// The kubeconfig is written before anything starts, so that whoever
	// sees every service's pid file (ready) finds it too.
	kubeconfig := filepath.Join(cfg.dataDir, KubeconfigFile)
	server := "https://127.0.0.1:" + strconv.Itoa(cfg.ports[PublicService])
	if _, ok := cfg.public(); ok {
		if err := writeKubeconfig(kubeconfig, server, AdminUser, certs.ca, certs.admin); err != nil {
			return err
		}
	}
	for _, s := range cfg.services {
		if s.Identity == nil {
			continue
		}
		if err := writeKubeconfig(ServiceKubeconfig(cfg.dataDir, s.Name), server, s.Identity.User, certs.ca, certs.clients[s.Name]); err != nil {
			return err
		}
	}
	if err := ensureAuditPolicy(cfg.dataDir); err != nil {
		return err
	}
	for _, dir := range []string{PoliciesDir, AdmissionPoliciesDir} {
		if err := os.MkdirAll(filepath.Join(cfg.dataDir, dir), 0o700); err != nil {
			return fmt.Errorf("create the policy directory: %w", err)
		}
	}

	etcdServers := cfg.etcdServers
	if len(etcdServers) == 0 {
		e, err := startEtcd(ctx, filepath.Join(cfg.dataDir, etcdDir), LogFile(cfg.dataDir, "etcd"), cfg.etcdPort)
		if err != nil {
			return err
		}
		defer func() {
			e.Close()
			cfg.log.Info("etcd stopped")
		}()
		etcdServers = []string{"http://" + e.Clients[0].Addr().String()}
		cfg.log.Info("etcd ready", "url", etcdServers[0], "data", filepath.Join(cfg.dataDir, etcdDir))
	}

	natsURL, natsKeys := cfg.natsURL, ""
	if natsURL == "" {
		auth, err := NATSAuth(cfg.dataDir)
		if err != nil {
			return err
		}
		natsKeys = auth.Dir
		srv, err := startNATS(auth.Config(), filepath.Join(cfg.dataDir, natsDir), LogFile(cfg.dataDir, "nats"), cfg.natsPort)
		if err != nil {
			return err
		}
		defer func() {
			srv.Shutdown()
			srv.WaitForShutdown()
			cfg.log.Info("nats stopped")
		}()
		natsURL = srv.ClientURL()
		cfg.log.Info("nats ready", "url", natsURL, "data", filepath.Join(cfg.dataDir, natsDir))
	}

	env := Env{
		PKI:           filepath.Join(cfg.dataDir, pkiDir),
		Data:          cfg.dataDir,
		Ports:         cfg.ports,
		Replicas:      cfg.replicas,
		EtcdServers:   strings.Join(etcdServers, ","),
		NATSURL:       natsURL,
		NATSKeys:      natsKeys,
		NATSTokenFile: cfg.natsTokenFile,
	}
	for _, s := range cfg.services {
		env.Running = append(env.Running, s.Name)
	}
	processes := cfg.processes()
	// failed receives the error of a supervisor that gave up; one slot
	// per process, so none blocks.
	failed := make(chan error, len(processes))
	var started []func()
	defer func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i]()
		}
	}()
	// last are the processes whose readiness needs services started
	// after them.
	var last []*supervisor
	for _, p := range processes {
		sup, err := cfg.supervisor(p, env, certs)
		if err != nil {
			return err
		}
		sctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := sup.run(sctx); err != nil {
				failed <- err
			}
		}()
		started = append(started, func() {
			cfg.log.Info("stopping service", "service", p.name)
			cancel()
			<-done
			cfg.log.Info("service stopped", "service", p.name)
		})
		if p.service.ReadyLast {
			last = append(last, sup)
			continue
		}
		if err := awaitReady(ctx, cfg, p.name, sup, failed); err != nil || ctx.Err() != nil {
			return err
		}
	}
	for _, sup := range last {
		if err := awaitReady(ctx, cfg, sup.name, sup, failed); err != nil || ctx.Err() != nil {
			return err
		}
	}

	if _, ok := cfg.public(); !ok {
		cfg.log.Info("kplane ready without " + PublicService + ": no admin kubeconfig written")
		return wait(ctx, cfg, failed)
	}
	cfg.log.Info("kplane ready", "kubeconfig", kubeconfig)
	fmt.Fprintf(cfg.out, "\nkplane is ready. Use it with:\n\n  export KUBECONFIG=%s\n  kubectl get ns\n\nLogs: %s\nAudit log: %s (policy: %s)\nStop: Ctrl-C here, or make down\n\n",
		relative(kubeconfig), relative(filepath.Join(cfg.dataDir, logsDir)),
		relative(filepath.Join(cfg.dataDir, logsDir, AuditLogFile)), relative(filepath.Join(cfg.dataDir, AuditPolicyFile)))

	return wait(ctx, cfg, failed)
}

// awaitReady returns once sup's process is ready, with an error when a
// service gave up or it is not ready in time, or nil when ctx ends.
func awaitReady(ctx context.Context, cfg *Config, name string, sup *supervisor, failed <-chan error) error {
	timeout := time.NewTimer(cfg.readyTimeout)
	defer timeout.Stop()
	select {
	case <-sup.ready:
		return nil
	case err := <-failed:
		return err
	case <-ctx.Done():
		return nil
	case <-timeout.C:
		return fmt.Errorf("%s not ready after %v (see %s)", name, cfg.readyTimeout, sup.logPath)
	}
}

// wait returns when ctx ends or a service gives up.
func wait(ctx context.Context, cfg *Config, failed <-chan error) error {
	select {
	case <-ctx.Done():
		cfg.log.Info("stopping kplane")
		return nil
	case err := <-failed:
		return err
	}
}

// public is the service the admin kubeconfig points at, when it runs.
func (cfg *Config) public() (Service, bool) {
	for _, s := range cfg.services {
		if s.Name == PublicService {
			return s, true
		}
	}
	return Service{}, false
}

// relative shortens path to one relative to the working directory when
// it is below it, as the user typed it.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// process is one process of a service: its only one, or one of its
// replicas.
type process struct {
	service Service
	name    string
	replica int
	port    int
}

// processes are the processes of cfg's services in start order, a
// service's replicas in order.
func (cfg *Config) processes() []process {
	var ps []process
	for _, s := range cfg.services {
		n := max(cfg.replicas[s.Name], 1)
		for i := range n {
			ps = append(ps, process{service: s, name: ReplicaName(s.Name, i, n), replica: i, port: cfg.ports[s.Name] + i})
		}
	}
	return ps
}

func (cfg *Config) supervisor(p process, env Env, certs *certificates) (*supervisor, error) {
	s := p.service
	env.Replica = p.replica
	args, err := s.Expand(env)
	if err != nil {
		return nil, err
	}
	args = append(args, cfg.extraArgs[s.Name]...)
	tlsConfig := &tls.Config{RootCAs: certs.ca.Pool(), MinVersion: tls.VersionTLS12}
	if s.ProbeAsAdmin {
		tlsConfig.Certificates = []tls.Certificate{certs.admin.TLSCertificate()}
	}
	var procEnv []string
	if cfg.procs > 0 {
		procEnv = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(cfg.procs))
	}
	return &supervisor{
		name:    p.name,
		path:    filepath.Join(cfg.binDir, s.Binary),
		args:    args,
		env:     procEnv,
		logPath: LogFile(cfg.dataDir, p.name),
		pidPath: PIDFile(cfg.dataDir, p.name),
		probe:   newProber(p.port, tlsConfig, cfg.probeInterval),
		grace:   cfg.stopGrace,
		policy:  cfg.restart,
		log:     cfg.log,
		ready:   make(chan struct{}),
	}, nil
}

// claim writes this process's pid to path, refusing when a live process
// holds it already, and returns what removes it.
func claim(path string) (func(), error) {
	if pid, err := readPID(path); err == nil && alive(pid) {
		return nil, fmt.Errorf("kplane-up is already running as pid %d (%s); stop it with make down", pid, path)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("write pid file: %w", err)
	}
	return func() { _ = os.Remove(path) }, nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s holds %q", path, b)
	}
	return pid, nil
}

// alive says whether a process pid exists (signal 0 checks without
// sending anything).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Down stops the launcher running on dataDir, waiting up to grace before
// killing it, then kills any service process a killed launcher left.
func Down(ctx context.Context, dataDir string, grace time.Duration) error {
	pidPath := filepath.Join(dataDir, launcherPID)
	pid, err := readPID(pidPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case alive(pid):
		if err := terminate(ctx, pid, grace); err != nil {
			return fmt.Errorf("stop kplane-up (pid %d): %w", pid, err)
		}
	}
	_ = os.Remove(pidPath)
	left, _ := filepath.Glob(filepath.Join(dataDir, runDir, "*.pid"))
	for _, f := range left {
		if pid, err := readPID(f); err == nil && alive(pid) {
			if err := terminate(ctx, pid, grace); err != nil {
				return fmt.Errorf("stop %s (pid %d): %w", strings.TrimSuffix(filepath.Base(f), ".pid"), pid, err)
			}
		}
		_ = os.Remove(f)
	}
	return nil
}

// terminate sends SIGTERM to pid and SIGKILL if it still runs after
// grace, and waits until it is gone.
func terminate(ctx context.Context, pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil
	}
	deadline := time.Now().Add(grace)
	killed := false
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for alive(pid) {
		if !killed && time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
