package launcher

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestInitBundles(t *testing.T) {
	o := InitOptions{
		DataDir:          t.TempDir(),
		Server:           "https://gateway:6443",
		AdminServer:      "https://127.0.0.1:16443",
		Hostnames:        []string{HostnamePlaceholder, "kplane-" + HostnamePlaceholder + ".ns.svc"},
		GatewayHostnames: []string{"kplane.example.com"},
	}
	bundles, err := Init(Services(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Services() {
		b := bundles[s.Name]
		cert := parseCert(t, b[BundleCert])
		for _, h := range []string{s.Name, "kplane-" + s.Name + ".ns.svc", "localhost"} {
			if err := cert.VerifyHostname(h); err != nil {
				t.Errorf("%s's certificate: %v", s.Name, err)
			}
		}
		if err := cert.VerifyHostname("kplane.example.com"); (err == nil) != (s.Name == PublicService) {
			t.Errorf("%s's certificate valid for the gateway's outside name: %v", s.Name, err == nil)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b[BundleCA])
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
			t.Errorf("%s's certificate does not chain to the bundle's CA: %v", s.Name, err)
		}
		// Each bundle holds only what its service uses: a core replica
		// must not be able to act as the gateway or mint tokens.
		var want []string
		want = append(want, BundleCA, BundleCert, BundleKey, BundleNKey)
		if s.Identity != nil {
			want = append(want, BundleKubeconfig)
		}
		switch s.Name {
		case PublicService:
			want = append(want, BundleProxyCert, BundleProxyKey)
		case "authn":
			want = append(want, BundleSigningKey, BundleVerifyKey)
		}
		var got []string
		for f := range b {
			got = append(got, f)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s's bundle = %v, want %v", s.Name, got, want)
		}
		if s.Identity != nil {
			kc, err := clientcmd.Load(b[BundleKubeconfig])
			if err != nil {
				t.Fatal(err)
			}
			if got := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server; got != o.Server {
				t.Errorf("%s's kubeconfig server = %q, want %q", s.Name, got, o.Server)
			}
			if got := parseCert(t, kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo].ClientCertificateData).Subject.CommonName; got != s.Identity.User {
				t.Errorf("%s's kubeconfig user = %q, want %q", s.Name, got, s.Identity.User)
			}
		}
	}
	if bytes.Equal(bundles["core"][BundleNKey], bundles["crd"][BundleNKey]) {
		t.Error("core and crd share a NATS key")
	}
	if !bytes.Contains(bundles[NATSBundle][BundleNATSAuthConfig], []byte("authorization")) {
		t.Errorf("NATS bundle has no authorization block:\n%s", bundles[NATSBundle][BundleNATSAuthConfig])
	}

	// Run again, as a restarted step would: the CA and the keys stay, so
	// running services keep trusting each other.
	again, err := Init(Services(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{BundleCA, BundleKey, BundleNKey, BundleKubeconfig} {
		if !bytes.Equal(again["authz"][f], bundles["authz"][f]) {
			t.Errorf("authz's %s changed on a second run", f)
		}
	}
	// A new hostname reissues the serving certificates, under the same CA.
	o.Hostnames = append(o.Hostnames, HostnamePlaceholder+".other")
	moved, err := Init(Services(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := parseCert(t, moved["core"][BundleCert]).VerifyHostname("core.other"); err != nil {
		t.Error(err)
	}
	if !bytes.Equal(moved["core"][BundleCA], bundles["core"][BundleCA]) {
		t.Error("a new hostname changed the CA")
	}
}

func TestExportModes(t *testing.T) {
	dir := t.TempDir()
	bundles := map[string]Bundle{"core": {BundleCert: []byte("cert"), BundleKey: []byte("key")}}
	if err := Export(dir, bundles, nil); err != nil {
		t.Fatal(err)
	}
	for f, mode := range map[string]os.FileMode{BundleCert: 0o644, BundleKey: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, "core", f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode = %v, want %v", f, fi.Mode().Perm(), mode)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "core")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("bundle folder: %v, %v", fi, err)
	}
	// Exporting again replaces the content.
	bundles["core"][BundleKey] = []byte("new")
	if err := Export(dir, bundles, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "core", BundleKey)); string(b) != "new" {
		t.Errorf("key after a second export = %q", b)
	}
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
