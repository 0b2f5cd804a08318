package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"kplane.dev/test/e2e/harness"
)

// refuseByName refuses creates of configmaps (core) and of
// CustomResourceDefinitions (crd) whose names start with "refused".
const refuseByName = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: refuse-by-name
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
    - apiGroups: ["apiextensions.k8s.io"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["customresourcedefinitions"]
  validations:
  - expression: '!object.metadata.name.startsWith("refused")'
    message: refused by name
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: refuse-by-name
spec:
  policyName: refuse-by-name
  validationActions: [Deny]
`

// TestWritesAreAdmitted shows core's and crd's writes go through the
// admission service, as make up runs them: a policy refuses both.
func TestWritesAreAdmitted(t *testing.T) {
	sys := harness.Start(t)
	applyManifest(t, sys, refuseByName)
	crd := strings.NewReplacer("gadgets", "refusedgadgets", "gadget", "refusedgadget", "Gadget", "RefusedGadget", "[gd]", "[rgd]").Replace(gadgetsCRD)
	for _, w := range []struct{ what, manifest string }{
		{"configmap", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: refused-cm\n"},
		{"CustomResourceDefinition", crd},
	} {
		eventuallyKubectl(t, 10*time.Second, func() error {
			file := t.TempDir() + "/manifest.yaml"
			if err := os.WriteFile(file, []byte(w.manifest), 0o600); err != nil {
				return err
			}
			_, errOut, err := sys.Kubectl(t, "create", "-f", file)
			if want := "ValidatingAdmissionPolicy 'refuse-by-name' with binding 'refuse-by-name' denied request: refused by name"; err == nil || !strings.Contains(errOut, want) {
				return fmt.Errorf("create a %s the policy refuses: %v %q, want %q", w.what, err, errOut, want)
			}
			return nil
		})
	}
	mustKubectl(t, sys, "create", "configmap", "admitted", "--from-literal=a=b")
}
