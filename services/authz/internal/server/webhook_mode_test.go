package server

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestWebhookMode runs a replica with --authorization-mode=Webhook,RBAC
// against a SubjectAccessReview webhook served over TLS.
func TestWebhookMode(t *testing.T) {
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch review.Spec.User {
		case "hooked":
			review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the hook says yes"}
		case "banned":
			review.Status = authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "the hook says no"}
		default:
			review.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "the hook does not know"}
		}
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(hook.Close)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hook"] = &clientcmdapi.Cluster{Server: hook.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})}
	kc.AuthInfos["authz"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["hook"] = &clientcmdapi.Context{Cluster: "hook", AuthInfo: "authz"}
	kc.CurrentContext = "hook"
	file := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t)
	o := e.options()
	o.AuthorizationModes = []string{ModeWebhook, ModeRBAC}
	o.WebhookConfigFile = file
	start(t, o)
	cases := []struct {
		user string
		want authorizationv1.SubjectAccessReviewStatus
	}{
		{"hooked", authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the hook says yes"}},
		{"banned", authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "the hook says no"}},
		// Neither mode decides: the webhook's reason, RBAC's empty one.
		{"stranger", authorizationv1.SubjectAccessReviewStatus{Reason: "the hook does not know"}},
	}
	for _, c := range cases {
		t.Run(c.user, func(t *testing.T) {
			got, err := ask(t, e, resourceSAR(c.user, nil, "get", "", "pods", "ns", "p"))
			if err != nil {
				t.Fatal(err)
			}
			if err := statusErr(got, c.want); err != nil {
				t.Error(err)
			}
		})
	}
}
