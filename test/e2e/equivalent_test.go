package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"kplane.dev/test/e2e/harness"
)

// equivalentConfiguration is a validating webhook on creates of
// resource in group's version v1, calling path, with matchPolicy policy.
func (w *admissionWebhook) equivalentConfiguration(name, group, resource, path, policy string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[1]s
webhooks:
- name: %[1]s.kplane.test
  clientConfig:
    url: %[2]s%[3]s
    caBundle: %[4]s
  rules:
  - operations: ["CREATE"]
    apiGroups: ["%[5]s"]
    apiVersions: ["v1"]
    resources: ["%[6]s"]
  matchPolicy: %[7]s
  admissionReviewVersions: ["v1"]
  sideEffects: None
`, name, w.URL, path, base64.StdEncoding.EncodeToString(w.caBundle), group, resource, policy)
}

// partPolicies are a ValidatingAdmissionPolicy and a
// MutatingAdmissionPolicy on parts in v1, where the size is spec.size,
// both with matchPolicy Equivalent: the validating one refuses sizes over
// 10, the mutating one labels a part with its size.
const partPolicies = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: small-parts
spec:
  failurePolicy: Fail
  matchConstraints:
    matchPolicy: Equivalent
    resourceRules:
    - apiGroups: ["e2e.example.com"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["parts"]
  validations:
  - expression: object.spec.size <= 10
    message: parts are small
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: small-parts-b
spec:
  policyName: small-parts
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: size-label
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    matchPolicy: Equivalent
    resourceRules:
    - apiGroups: ["e2e.example.com"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["parts"]
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/metadata/labels", value: {"size": string(object.spec.size)}}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: size-label-b
spec:
  policyName: size-label
`

// TestMatchPolicyEquivalent writes custom resources through v2 of a CRD
// whose webhooks and policies name only v1, converted by a conversion
// webhook that moves the size (v1's spec.size is v2's
// spec.dimensions.size), and core/v1 events that a webhook on
// events.k8s.io/v1 names. Under matchPolicy Equivalent, each webhook and
// policy sees the write in the version it named, as kube converts it;
// under Exact it does not see it.
func TestMatchPolicyEquivalent(t *testing.T) {
	conv := newConversionWebhook(t)
	hook := newAdmissionWebhook(t)
	sys := harness.Start(t)
	dyn, err := dynamic.NewForConfig(sys.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, sys, "conversion")
	createCRD(t, sys, dyn, twoVersionCRD("parts", "Part", webhookConversion(fmt.Sprintf("        url: %s%s\n", conv.URL, urlPath), conv.caBundle)))
	applyManifest(t, sys, hook.equivalentConfiguration("parts-equivalent", "e2e.example.com", "parts", "/record-equivalent", "Equivalent")+"---\n"+
		hook.equivalentConfiguration("parts-exact", "e2e.example.com", "parts", "/record-exact", "Exact")+"---\n"+
		hook.equivalentConfiguration("events-equivalent", "events.k8s.io", "events", "/record-events", "Equivalent")+"---\n"+
		partPolicies)

	part := func(name string, size int) string {
		return fmt.Sprintf("apiVersion: e2e.example.com/v2\nkind: Part\nmetadata:\n  name: %s\n  namespace: conversion\nspec:\n  dimensions:\n    size: %d\n", name, size)
	}
	create := func(manifest string) (string, error) {
		file := filepath.Join(t.TempDir(), "object.yaml")
		if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := sys.Kubectl(t, "create", "-f", file)
		return errOut, err
	}

	t.Run("policies see v2 writes in v1", func(t *testing.T) {
		n := 0
		eventuallyKubectl(t, 15*time.Second, func() error {
			n++
			errOut, err := create(part(fmt.Sprintf("big-%d", n), 20))
			if want := "denied request: parts are small"; err == nil || !strings.Contains(errOut, want) {
				return fmt.Errorf("create of a part of size 20 in v2: %v %q, want refused with %q", err, errOut, want)
			}
			return nil
		})
		if errOut, err := create(part("small", 3)); err != nil {
			t.Fatalf("create of a part of size 3 in v2: %v\n%s", err, errOut)
		}
		if got := mustKubectl(t, sys, "get", "parts.v1.e2e.example.com", "small", "-n", "conversion", "-o", "jsonpath={.metadata.labels.size} {.spec.size}"); got != "3 3" {
			t.Errorf("part small read in v1: label size and spec.size %q, want the mutating policy's label 3 and size 3", got)
		}
	})

	t.Run("webhooks see v2 writes in v1 only under Equivalent", func(t *testing.T) {
		got, ok := hook.lastOf("/record-equivalent")
		if !ok {
			t.Fatal("the Equivalent webhook on v1 was not called for a write in v2")
		}
		if got.Kind["version"] != "v1" || got.RequestKind["version"] != "v2" {
			t.Errorf("kind %v requestKind %v, want v1 and the client's v2", got.Kind, got.RequestKind)
		}
		if spec, _ := got.Object["spec"].(map[string]any); got.Object["apiVersion"] != "e2e.example.com/v1" || spec["size"] != float64(3) {
			t.Errorf("object %v, want the part converted to v1 with spec.size 3", got.Object)
		}
		if calls, _ := hook.callsOf("/record-exact"); calls != 0 {
			t.Errorf("the Exact webhook on v1 was called %d times for writes in v2", calls)
		}
		if errOut, err := create("apiVersion: e2e.example.com/v1\nkind: Part\nmetadata:\n  name: in-v1\n  namespace: conversion\nspec:\n  size: 4\n"); err != nil {
			t.Fatalf("create a part in v1: %v\n%s", err, errOut)
		}
		if calls, _ := hook.callsOf("/record-exact"); calls != 1 {
			t.Errorf("the Exact webhook on v1 was called %d times for one write in v1, want 1", calls)
		}
	})

	t.Run("a webhook on events.k8s.io sees core events", func(t *testing.T) {
		n := 0
		eventuallyKubectl(t, 15*time.Second, func() error {
			n++
			ev := fmt.Sprintf("apiVersion: v1\nkind: Event\nmetadata:\n  name: ev-%d\n  namespace: conversion\ninvolvedObject:\n  kind: Part\n  name: small\n  namespace: conversion\nreason: Checked\nmessage: all good\ntype: Normal\n", n)
			if errOut, err := create(ev); err != nil {
				return fmt.Errorf("create a core event: %v\n%s", err, errOut)
			}
			if _, ok := hook.lastOf("/record-events"); !ok {
				return fmt.Errorf("the webhook on events.k8s.io/v1 was not called for core event ev-%d", n)
			}
			return nil
		})
		got, _ := hook.lastOf("/record-events")
		if got.Kind["group"] != "events.k8s.io" || got.RequestKind["group"] != "" {
			t.Errorf("kind %v requestKind %v, want events.k8s.io's and core's", got.Kind, got.RequestKind)
		}
		if regarding, _ := got.Object["regarding"].(map[string]any); got.Object["note"] != "all good" || regarding["name"] != "small" {
			t.Errorf("object %v, want the event as events.k8s.io/v1 has it: note and regarding", got.Object)
		}
	})
}
