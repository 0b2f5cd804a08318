package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"kplane.dev/libs/pki"
)

// Audit files in the data directory.
const (
	// AuditPolicyFile is the gateway's audit policy: written once with
	// DefaultAuditPolicy, then the operator's to edit; the gateway reads
	// it when it starts.
	AuditPolicyFile = "audit-policy.yaml"
	// AuditLogFile is the gateway's audit log, in the logs directory.
	AuditLogFile = "audit.log"
)

// DefaultAuditPolicy records who changed what, and who read secrets, as
// a cluster operator wants from a development control plane, without
// the noise of every read: Metadata for Secrets, ConfigMaps, tokens and
// the streaming subresources (their bodies are credentials or
// terminals), Request for every other write, and nothing for health
// checks, discovery and other reads.
const DefaultAuditPolicy = `# kplane's audit policy (audit.k8s.io/v1, as kube-apiserver's --audit-policy-file).
# Written by kplane-up when missing and kept afterwards: edit it and restart (make up).
# The first rule that matches a request decides its level.
apiVersion: audit.k8s.io/v1
kind: Policy
# Each request is recorded once it is answered (watches when they start too).
omitStages: [RequestReceived]
omitManagedFields: true
rules:
# Health checks, the version and discovery.
- level: None
  nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/version", "/version/", "/api", "/api/*", "/apis", "/apis/*", "/openapi*"]
# Objects whose content is a secret: who touched them, not what they hold.
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets", "configmaps", "serviceaccounts/token"]
  - group: "authentication.k8s.io"
    resources: ["tokenreviews"]
# Terminals and proxies into workloads.
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "services/proxy", "nodes/proxy"]
# Other reads.
- level: None
  verbs: ["get", "list", "watch"]
# Every other write, with what was sent.
- level: Request
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: Metadata
`

// ensureAuditPolicy writes the default audit policy into dataDir unless
// a policy is there already.
func ensureAuditPolicy(dataDir string) error {
	path := filepath.Join(dataDir, AuditPolicyFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read the audit policy: %w", err)
	}
	if err := pki.WriteFile(path, []byte(DefaultAuditPolicy), 0o600); err != nil {
		return fmt.Errorf("write the default audit policy: %w", err)
	}
	return nil
}
