package reviews_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
)

// TestKubectl drives stock kubectl through a stand-in for the gateway
// that passes every request on as alice: create token, auth whoami and
// auth can-i must work as against kube-apiserver.
func TestKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl in PATH")
	}
	c, _ := start(t, true)
	f := &fakeAuth{}
	f.serve(t, c)
	r := c.Replicas[0]
	admin, err := kubernetes.NewForConfig(r.Config)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := admin.CoreV1().ServiceAccounts("default").Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	rt, err := restclient.TransportFor(r.As(t, alice))
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	gateway := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(p *httputil.ProxyRequest) { p.SetURL(target) },
		Transport: rt,
	})
	t.Cleanup(gateway.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+gateway.URL+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}

	if got := run("create", "token", "builder", "-n", "default"); got != "signed-for-"+string(sa.UID) {
		t.Errorf("create token printed %q", got)
	}
	var whoami struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(run("auth", "whoami", "-o", "json")), &whoami); err != nil || whoami.Status.UserInfo.Username != "alice" {
		t.Errorf("auth whoami: %v %+v", err, whoami)
	}
	if got := run("auth", "can-i", "get", "configmaps", "-n", "ns1"); got != "yes" {
		t.Errorf("auth can-i printed %q", got)
	}
	if got := run("auth", "can-i", "--list", "-n", "ns1"); !strings.Contains(got, "configmaps") {
		t.Errorf("auth can-i --list printed %q", got)
	}
}
