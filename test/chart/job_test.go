package chart

import (
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/clientcmd"

	"kplane.dev/deploy/launcher"
)

// bundles are the files of each bundle (a service's, nats, admin) by
// name.
type bundles map[string]map[string][]byte

// issued is what the certificate Job of c issues, or, without one, what
// kplane-up init issues for any installation: the files the Secrets a
// user supplies must hold too.
func issued(t *testing.T, c chartCase, objs objects) bundles {
	t.Helper()
	if c.job {
		return runJob(t, c, objs)
	}
	contract.once.Do(func() {
		if contract.dir, contract.err = os.MkdirTemp("", "kplane-chart-init-"); contract.err != nil {
			return
		}
		var b map[string]launcher.Bundle
		b, contract.err = launcher.Init(launcher.Services(), launcher.InitOptions{
			DataDir: contract.dir, Server: "https://gateway:6443", AdminServer: "https://127.0.0.1:6443",
		})
		contract.b = bundles{}
		for name, files := range b {
			contract.b[name] = files
		}
	})
	if contract.err != nil {
		t.Fatal(contract.err)
	}
	return contract.b
}

// contract is what launcher.Init issues, made once: package state like
// built, and TestMain removes its directory.
var contract struct {
	once sync.Once
	dir  string
	b    bundles
	err  error
}

// runJob runs kplane-up with the certificate Job's arguments, storing
// into a directory (--export) rather than into Secrets, and checks what
// it issued against what the chart's pods need: a serving certificate of
// each service valid for the name it is called by, kubeconfigs naming
// the gateway's internal Service, the admin's naming where the admin
// reaches the gateway, which its certificate is valid for.
func runJob(t *testing.T, c chartCase, objs objects) bundles {
	t.Helper()
	job := get[*batchv1.Job](t, objs, "Job", prefix+"-certificates")
	args := job.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "init" {
		t.Fatalf("the Job runs kplane-up %q, want init", args)
	}
	if ns, _ := flag(args, "secrets-namespace"); ns != namespace {
		t.Errorf("the Job stores its Secrets in namespace %q, want the release's", ns)
	}
	if p, _ := flag(args, "secret-prefix"); p != c.secretPrefix {
		t.Errorf("the Job names its Secrets %s-*, want %s-*", p, c.secretPrefix)
	}
	dir := t.TempDir()
	var run []string
	for _, a := range args {
		switch name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "="); name {
		case "secrets-namespace", "secret-prefix":
		case "data-dir":
			run = append(run, "--data-dir="+filepath.Join(dir, "data"))
		default:
			run = append(run, a)
		}
	}
	run = append(run, "--export="+filepath.Join(dir, "export"))
	if out, err := exec.Command(filepath.Join(binaries(t), "kplane-up"), run...).CombinedOutput(); err != nil {
		t.Fatalf("kplane-up %s: %v\n%s", strings.Join(run, " "), err, out)
	}
	b := bundles{}
	entries, err := os.ReadDir(filepath.Join(dir, "export"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		files, err := os.ReadDir(filepath.Join(dir, "export", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b[e.Name()] = map[string][]byte{}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(dir, "export", e.Name(), f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			b[e.Name()][f.Name()] = data
		}
	}
	if got, want := slices.Sorted(mapKeys(b)), slices.Sorted(slices.Values(append(slices.Clone(services), "nats", "admin"))); !slices.Equal(got, want) {
		t.Fatalf("the Job issues bundles %v, want %v", got, want)
	}

	for _, s := range services {
		cert := leaf(t, s, b[s][launcher.BundleCert])
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(b[s][launcher.BundleCA])
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots}); err != nil {
			t.Errorf("%s's certificate: %v", s, err)
		}
		if err := cert.VerifyHostname(prefix + "-" + s + "." + namespace + ".svc"); err != nil {
			t.Errorf("%s's certificate is not valid for its Service: %v", s, err)
		}
		kc, ok := b[s][launcher.BundleKubeconfig]
		if !ok {
			continue
		}
		server := kubeconfigServer(t, s, kc)
		leadsTo(t, objs, s+"'s kubeconfig", server, "gateway-internal", "https")
		if err := leaf(t, "gateway", b["gateway"][launcher.BundleCert]).VerifyHostname(hostOf(server)); err != nil {
			t.Errorf("the gateway's certificate is not valid for %s, which %s's kubeconfig names: %v", hostOf(server), s, err)
		}
	}
	admin := kubeconfigServer(t, "admin", b["admin"][launcher.BundleKubeconfig])
	gw := leaf(t, "gateway", b["gateway"][launcher.BundleCert])
	for _, h := range []string{hostOf(admin), "127.0.0.1"} {
		if err := gw.VerifyHostname(h); err != nil {
			t.Errorf("the gateway's certificate is not valid for %s, where the admin reaches it: %v", h, err)
		}
	}
	if c.adminServer == "" {
		leadsTo(t, objs, "the admin kubeconfig", admin, "gateway", "https")
	} else if admin != c.adminServer {
		t.Errorf("the admin kubeconfig names %s, want %s", admin, c.adminServer)
	}
	return b
}

// hostOf is a URL's host name.
func hostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func leaf(t *testing.T, who string, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM certificate", who)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	return cert
}

func kubeconfigServer(t *testing.T, who string, data []byte) string {
	t.Helper()
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("%s's kubeconfig: %v", who, err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.Clusters[ctx.Cluster] == nil {
		t.Fatalf("%s's kubeconfig has no current cluster", who)
	}
	return cfg.Clusters[ctx.Cluster].Server
}
