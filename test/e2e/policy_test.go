package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kplane.dev/test/e2e/harness"
)

// maxKeysPolicy refuses configmaps with more data keys than its param
// allows; one binding per validation action, each for the configmaps
// labelled kplane.test/case=vap-<action>.
const maxKeysPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: max-keys
spec:
  failurePolicy: Fail
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
  variables:
  - name: keys
    expression: 'has(object.data) ? object.data.size() : 0'
  validations:
  - expression: variables.keys <= int(params.data.max)
    messageExpression: '"too many keys: " + string(variables.keys) + " > " + params.data.max'
  auditAnnotations:
  - key: keys
    valueExpression: string(variables.keys)
`

func maxKeysBinding(action string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: max-keys-%[1]s
spec:
  policyName: max-keys
  validationActions: [%[2]s]
  paramRef:
    name: max-keys-limit
    namespace: default
    parameterNotFoundAction: Deny
  matchResources:
    objectSelector:
      matchLabels:
        kplane.test/case: vap-%[1]s
`, strings.ToLower(action), action)
}

// keysConfigMap creates a configmap of case c with n data keys through
// kubectl and returns kubectl's error output.
func keysConfigMap(t *testing.T, sys *harness.System, c, name string, n int) (string, error) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  labels:\n    kplane.test/case: %s\ndata:\n", name, c)
	for i := range n {
		fmt.Fprintf(&b, "  k%d: v\n", i)
	}
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := sys.Kubectl(t, "create", "-f", file)
	return errOut, err
}

// TestAdmissionPolicies drives ValidatingAdmissionPolicies with params,
// a MutatingAdmissionPolicy and the operator's Rego policies with the
// stock kubectl.
func TestAdmissionPolicies(t *testing.T) {
	sys := harness.Start(t)

	t.Run("ValidatingAdmissionPolicy", func(t *testing.T) {
		mustKubectl(t, sys, "create", "configmap", "max-keys-limit", "--from-literal=max=2")
		applyManifest(t, sys, maxKeysPolicy)
		for _, action := range []string{"Deny", "Warn", "Audit"} {
			applyManifest(t, sys, maxKeysBinding(action))
		}
		// A validation without a reason is Invalid, as in kube.
		deny := `The configmaps "%s" is invalid: : ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-deny' denied request: too many keys: 3 > 2`
		eventuallyKubectl(t, 10*time.Second, func() error {
			name := fmt.Sprintf("deny-%d", time.Now().UnixNano())
			errOut, err := keysConfigMap(t, sys, "vap-deny", name, 3)
			if err == nil || !strings.Contains(errOut, fmt.Sprintf(deny, name)) {
				return fmt.Errorf("three keys past Deny: %v %q, want %q", err, errOut, fmt.Sprintf(deny, name))
			}
			return nil
		})
		if errOut, err := keysConfigMap(t, sys, "vap-deny", "two-keys", 2); err != nil {
			t.Errorf("two keys past Deny were refused: %v\n%s", err, errOut)
		}

		errOut, err := keysConfigMap(t, sys, "vap-warn", "warned", 3)
		if want := "Warning: Validation failed for ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-warn': too many keys: 3 > 2"; err != nil || !strings.Contains(errOut, want) {
			t.Errorf("three keys past Warn: %v %q, want written with %q", err, errOut, want)
		}
		if errOut, err := keysConfigMap(t, sys, "vap-audit", "audited", 3); err != nil || strings.Contains(errOut, "Warning") {
			t.Errorf("three keys past Audit: %v %q, want written without a warning", err, errOut)
		}

		// A new param value takes effect.
		mustKubectl(t, sys, "patch", "configmap", "max-keys-limit", "-p", `{"data":{"max":"5"}}`)
		eventuallyKubectl(t, 10*time.Second, func() error {
			if errOut, err := keysConfigMap(t, sys, "vap-deny", fmt.Sprintf("raised-%d", time.Now().UnixNano()), 3); err != nil {
				return fmt.Errorf("three keys after the limit was raised to 5: %v\n%s", err, errOut)
			}
			return nil
		})
		// A missing param, with parameterNotFoundAction Deny.
		mustKubectl(t, sys, "delete", "configmap", "max-keys-limit")
		eventuallyKubectl(t, 10*time.Second, func() error {
			errOut, err := keysConfigMap(t, sys, "vap-deny", fmt.Sprintf("noparam-%d", time.Now().UnixNano()), 1)
			if want := "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"; err == nil || !strings.Contains(errOut, want) {
				return fmt.Errorf("a write with the param gone: %v %q, want %q", err, errOut, want)
			}
			return nil
		})
	})

	t.Run("authorizer", func(t *testing.T) {
		applyManifest(t, sys, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: authorized
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  validations:
  - expression: "!authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('delete').allowed()"
    message: who may delete secrets may not create these
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: authorized
spec:
  policyName: authorized
  validationActions: [Deny]
  matchResources:
    objectSelector:
      matchLabels:
        kplane.test/case: authz
`)
		// The admin may delete secrets: refused.
		eventuallyKubectl(t, 10*time.Second, func() error {
			errOut, err := keysConfigMap(t, sys, "authz", fmt.Sprintf("admin-%d", time.Now().UnixNano()), 1)
			if want := "ValidatingAdmissionPolicy 'authorized' with binding 'authorized' denied request: who may delete secrets may not create these"; err == nil || !strings.Contains(errOut, want) {
				return fmt.Errorf("the admin's write: %v %q, want %q", err, errOut, want)
			}
			return nil
		})
		// A service account that may only create configmaps: passed.
		mustKubectl(t, sys, "create", "serviceaccount", "limited")
		mustKubectl(t, sys, "create", "role", "configmap-creator", "--verb=create", "--resource=configmaps")
		mustKubectl(t, sys, "create", "rolebinding", "limited", "--role=configmap-creator", "--serviceaccount=default:limited")
		token := strings.TrimSpace(mustKubectl(t, sys, "create", "token", "limited"))
		file := filepath.Join(t.TempDir(), "limited.yaml")
		if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: limited-cm\n  labels:\n    kplane.test/case: authz\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		eventuallyKubectl(t, 10*time.Second, func() error {
			if _, errOut, err := sys.KubectlToken(t, token, "create", "-f", file); err != nil {
				return fmt.Errorf("a write by a user who may not delete secrets: %v\n%s", err, errOut)
			}
			return nil
		})
	})

	t.Run("typeChecking", func(t *testing.T) {
		applyManifest(t, sys, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: mistyped
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  validations:
  - expression: object.data.size == 1
  - expression: has(object.data) && object.data["a"] == 1
`)
		eventuallyKubectl(t, 15*time.Second, func() error {
			got := mustKubectl(t, sys, "get", "validatingadmissionpolicy", "mistyped", "-o",
				`jsonpath={.status.observedGeneration} {range .status.typeChecking.expressionWarnings[*]}{.fieldRef}: {.warning}{"\n"}{end}`)
			for _, want := range []string{"1 spec.validations[0].expression: ", "spec.validations[1].expression: ", "no matching overload for '_==_' applied to '(string, int)'"} {
				if !strings.Contains(got, want) {
					return fmt.Errorf("status of a mistyped policy: %q, want it to hold %q", got, want)
				}
			}
			return nil
		})
		if got := mustKubectl(t, sys, "get", "validatingadmissionpolicy", "mistyped", "-o", "jsonpath={.metadata.managedFields[?(@.subresource==\"status\")].manager}"); got != "validatingadmissionpolicy-status-controller" {
			t.Errorf("status written by %q, want kube's validatingadmissionpolicy-status-controller", got)
		}
	})

	t.Run("MutatingAdmissionPolicy", func(t *testing.T) {
		applyManifest(t, sys, `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: add-owner
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"owner": request.userInfo.username}}}'
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/data/patched", value: "yes"}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: add-owner
spec:
  policyName: add-owner
  matchResources:
    objectSelector:
      matchLabels:
        kplane.test/case: map
`)
		eventuallyKubectl(t, 10*time.Second, func() error {
			name := fmt.Sprintf("map-%d", time.Now().UnixNano())
			if errOut, err := keysConfigMap(t, sys, "map", name, 1); err != nil {
				return fmt.Errorf("create: %v\n%s", err, errOut)
			}
			got := mustKubectl(t, sys, "get", "configmap", name, "-o", "jsonpath={.metadata.labels.owner} {.data.patched}")
			if want := "kplane-admin yes"; got != want {
				return fmt.Errorf("owner label and patched key are %q, want %q", got, want)
			}
			return nil
		})
	})

	t.Run("Rego", func(t *testing.T) {
		policy := `package kplane.admission.e2e

deny contains sprintf("configmap %q is refused by rego", [input.name]) if {
	input.resource.resource == "configmaps"
	input.object.metadata.labels["kplane.test/case"] == "rego"
}
`
		if err := os.WriteFile(filepath.Join(sys.DataDir, "admission-policies", "e2e.rego"), []byte(policy), 0o600); err != nil {
			t.Fatal(err)
		}
		eventuallyKubectl(t, 15*time.Second, func() error {
			name := fmt.Sprintf("rego-%d", time.Now().UnixNano())
			errOut, err := keysConfigMap(t, sys, "rego", name, 1)
			want := fmt.Sprintf(`configmaps "%s" is forbidden: configmap "%s" is refused by rego`, name, name)
			if err == nil || !strings.Contains(errOut, "Error from server (Forbidden)") || !strings.Contains(errOut, want) {
				return fmt.Errorf("a configmap the directory's policy refuses: %v %q, want %q", err, errOut, want)
			}
			return nil
		})

		// A policy from a labelled ConfigMap, warning.
		mustKubectl(t, sys, "create", "configmap", "e2e-warn", "-n", "kube-system",
			`--from-literal=warn.rego=package kplane.admission.e2ewarn

warn contains "this configmap is watched by rego" if {
	input.object.metadata.labels["kplane.test/case"] == "rego-warn"
}
`)
		mustKubectl(t, sys, "label", "configmap", "e2e-warn", "-n", "kube-system", "kplane.dev/admission-policy=true")
		eventuallyKubectl(t, 15*time.Second, func() error {
			errOut, err := keysConfigMap(t, sys, "rego-warn", fmt.Sprintf("regowarn-%d", time.Now().UnixNano()), 1)
			if want := "Warning: this configmap is watched by rego"; err != nil || !strings.Contains(errOut, want) {
				return fmt.Errorf("a configmap the ConfigMap's policy warns about: %v %q, want %q", err, errOut, want)
			}
			return nil
		})
	})

	t.Run("custom resources", func(t *testing.T) {
		applyManifest(t, sys, gadgetsCRD)
		mustKubectl(t, sys, "wait", "--for=condition=Established", "crd/gadgets.e2e.example.com")
		applyManifest(t, sys, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: small-gadgets
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["e2e.example.com"]
      apiVersions: ["*"]
      operations: ["CREATE", "UPDATE"]
      resources: ["gadgets"]
  validations:
  - expression: object.spec.size <= 5
    message: gadgets are small
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: small-gadgets
spec:
  policyName: small-gadgets
  validationActions: [Deny]
`)
		eventuallyKubectl(t, 10*time.Second, func() error {
			file := filepath.Join(t.TempDir(), "gadget.yaml")
			name := fmt.Sprintf("big-%d", time.Now().UnixNano())
			if err := os.WriteFile(file, []byte("apiVersion: e2e.example.com/v1\nkind: Gadget\nmetadata:\n  name: "+name+"\nspec:\n  size: 8\n"), 0o600); err != nil {
				return err
			}
			_, errOut, err := sys.Kubectl(t, "create", "-f", file)
			if want := fmt.Sprintf(`Error from server (Forbidden): error when creating "%s": gadgets.e2e.example.com "%s" is forbidden: ValidatingAdmissionPolicy 'small-gadgets' with binding 'small-gadgets' denied request: gadgets are small`, file, name); err == nil || !strings.Contains(errOut, want) {
				return fmt.Errorf("a big gadget: %v %q, want %q", err, errOut, want)
			}
			return nil
		})
	})
}
