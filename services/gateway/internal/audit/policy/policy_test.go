package policy

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"kplane.dev/libs/apiserver/requestinfo"
)

// testPolicy exercises every kind of match kube's policy has, in an
// order where an earlier rule hides later ones.
const testPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
omitManagedFields: true
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
  resources:
  - group: ""
    resources: ["endpoints", "services"]
- level: None
  userGroups: ["system:nodes"]
  verbs: ["get"]
  resources:
  - group: ""
    resources: ["nodes"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets", "configmaps"]
  omitManagedFields: false
- level: Request
  resources:
  - group: ""
    resources: ["pods/log", "*/status"]
- level: RequestResponse
  resources:
  - group: "apps"
    resources: ["deployments/*"]
- level: Request
  namespaces: ["kube-system"]
- level: Metadata
  resources:
  - group: ""
    resources: ["serviceaccounts"]
    resourceNames: ["default"]
- level: RequestResponse
  verbs: ["create", "update", "patch", "delete"]
  omitStages: [ResponseStarted]
- level: Metadata
  nonResourceURLs: ["*"]
`

func request(t *testing.T, method, path string) *requestinfo.Info {
	t.Helper()
	u, err := url.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	return requestinfo.Parse(method, u)
}

func TestEvaluate(t *testing.T) {
	p, err := Parse([]byte(testPolicy))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	e := New(p)
	received := []auditv1.Stage{auditv1.StageRequestReceived}
	for _, tc := range []struct {
		name, user, method, path string
		groups                   []string
		want                     Decision
	}{
		{"user and verb", "system:kube-proxy", http.MethodGet, "/api/v1/namespaces/a/endpoints?watch=1", nil, Decision{Level: "None", OmitStages: received, OmitManagedFields: true}},
		{"same user, other verb", "system:kube-proxy", http.MethodGet, "/api/v1/namespaces/a/endpoints", nil, Decision{Level: "None", OmitStages: received, OmitManagedFields: true}},
		{"group", "node-1", http.MethodGet, "/api/v1/nodes/node-1", []string{"system:authenticated", "system:nodes"}, Decision{Level: "None", OmitStages: received, OmitManagedFields: true}},
		{"group missing", "alice", http.MethodPost, "/api/v1/nodes", []string{"system:authenticated"}, Decision{Level: "RequestResponse", OmitStages: []auditv1.Stage{"RequestReceived", "ResponseStarted"}, OmitManagedFields: true}},
		{"non-resource prefix", "alice", http.MethodGet, "/healthz/etcd", nil, Decision{Level: "None", OmitStages: received, OmitManagedFields: true}},
		{"non-resource exact", "alice", http.MethodGet, "/version", nil, Decision{Level: "None", OmitStages: received, OmitManagedFields: true}},
		{"non-resource not a prefix", "alice", http.MethodGet, "/version/x", nil, Decision{Level: "Metadata", OmitStages: received, OmitManagedFields: true}},
		{"secrets", "alice", http.MethodPost, "/api/v1/namespaces/a/secrets", nil, Decision{Level: "Metadata", OmitStages: received}},
		{"secrets in another group", "alice", http.MethodPost, "/apis/example.com/v1/namespaces/a/secrets", nil, Decision{Level: "RequestResponse", OmitStages: []auditv1.Stage{"RequestReceived", "ResponseStarted"}, OmitManagedFields: true}},
		{"subresource by name", "alice", http.MethodGet, "/api/v1/namespaces/a/pods/p/log", nil, Decision{Level: "Request", OmitStages: received, OmitManagedFields: true}},
		{"resource alone is not its subresource", "alice", http.MethodGet, "/api/v1/namespaces/a/pods/p", nil, Decision{Level: "None", OmitStages: received, OmitManagedFields: true}},
		{"any resource's subresource", "alice", http.MethodPut, "/api/v1/namespaces/a/pods/p/status", nil, Decision{Level: "Request", OmitStages: received, OmitManagedFields: true}},
		{"resource and its subresources", "alice", http.MethodGet, "/apis/apps/v1/namespaces/a/deployments/d/scale", nil, Decision{Level: "RequestResponse", OmitStages: received, OmitManagedFields: true}},
		{"resource/* matches the resource", "alice", http.MethodGet, "/apis/apps/v1/namespaces/a/deployments", nil, Decision{Level: "RequestResponse", OmitStages: received, OmitManagedFields: true}},
		{"namespace", "alice", http.MethodGet, "/api/v1/namespaces/kube-system/pods", nil, Decision{Level: "Request", OmitStages: received, OmitManagedFields: true}},
		{"namespace does not match non-resource", "alice", http.MethodGet, "/openapi/v2", nil, Decision{Level: "Metadata", OmitStages: received, OmitManagedFields: true}},
		{"resource name", "alice", http.MethodGet, "/api/v1/namespaces/a/serviceaccounts/default", nil, Decision{Level: "Metadata", OmitStages: received, OmitManagedFields: true}},
		{"other resource name", "alice", http.MethodGet, "/api/v1/namespaces/a/serviceaccounts/other", nil, Decision{Level: "None", OmitStages: received, OmitManagedFields: true}},
		{"verbs alone", "alice", http.MethodDelete, "/apis/rbac.authorization.k8s.io/v1/clusterroles/x", nil, Decision{Level: "RequestResponse", OmitStages: []auditv1.Stage{"RequestReceived", "ResponseStarted"}, OmitManagedFields: true}},
		{"no rule", "alice", http.MethodGet, "/apis/rbac.authorization.k8s.io/v1/clusterroles", nil, Decision{Level: "None", OmitStages: received, OmitManagedFields: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := e.Evaluate(Attributes{User: tc.user, Groups: tc.groups, Info: request(t, tc.method, tc.path)})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, policy, want string }{
		{"empty", ``, "want apiVersion audit.k8s.io/v1"},
		{"beta", "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]", "want apiVersion audit.k8s.io/v1"},
		{"no rules", "apiVersion: audit.k8s.io/v1\nkind: Policy\n", "at least one rule"},
		{"level", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Everything}]", `unknown level "Everything"`},
		{"stage", "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Started]\nrules: [{level: None}]", `unknown stage "Started"`},
		{"mixed", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/x], resources: [{resources: [pods]}]}]", "both regular resources and non-resource URLs"},
		{"url", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/a*b]}]", "* only at its end"},
		{"unknown field", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, user: [a]}]", "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.policy))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
