package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"kplane.dev/test/e2e/harness"
)

// gadgetsCRD is a namespaced CRD with what kubectl users meet: a schema
// with a default, bounds and a CEL rule, printer columns (one wide only),
// a short name, the category all, /status and /scale.
const gadgetsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.e2e.example.com
spec:
  group: e2e.example.com
  scope: Namespaced
  names:
    plural: gadgets
    singular: gadget
    kind: Gadget
    shortNames: [gd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Color
      type: string
      jsonPath: .spec.color
      priority: 1
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the gadget should be.
            properties:
              size:
                type: integer
                minimum: 1
                maximum: 10
              color:
                type: string
                default: blue
              replicas:
                type: integer
            x-kubernetes-validations:
            - rule: self.size != 7
              message: seven is unlucky
          status:
            type: object
            properties:
              replicas:
                type: integer
`

const gadget = `apiVersion: e2e.example.com/v1
kind: Gadget
metadata:
  name: g1
spec:
  size: 3
  replicas: 1
`

// TestCRDKubectl drives a CRD's whole life with the machine's kubectl:
// kube's exact lines for what kubectl prints, defaults, pruning, schema
// and CEL refusals, subresources, columns, names and cleanup.
func TestCRDKubectl(t *testing.T) {
	sys := harness.Start(t)
	createNamespace(t, sys, "crd")
	runSteps(t, sys, "crd", []step{
		{name: "create the CRD", manifest: gadgetsCRD, args: []string{"apply", "-f", "{file}"},
			stdout: "customresourcedefinition.apiextensions.k8s.io/gadgets.e2e.example.com created\n"},
		{name: "wait until established", args: []string{"wait", "--for=condition=Established", "crd/gadgets.e2e.example.com", "--timeout=30s"},
			stdout: "customresourcedefinition.apiextensions.k8s.io/gadgets.e2e.example.com condition met\n"},
		// Established means discovery lists the kind: kubectl finds it at
		// once.
		{name: "api-resources", args: []string{"api-resources", "--api-group=e2e.example.com"},
			stdout: "NAME      SHORTNAMES   APIVERSION           NAMESPACED   KIND\ngadgets   gd           e2e.example.com/v1   true         Gadget\n"},
		{name: "an unknown field is refused by strict validation", manifest: strings.Replace(gadget, "  size: 3\n", "  size: 3\n  shape: round\n", 1),
			args: []string{"apply", "--validate=strict", "-f", "{file}"}, fails: true,
			stderr: "Error from server (BadRequest): error when creating \"{file}\": Gadget in version \"v1\" cannot be handled as a Gadget: strict decoding error: unknown field \"spec.shape\"\n"},
		{name: "an unknown field is pruned without strict validation", args: []string{"apply", "--validate=false", "-f", "{file}"},
			stdout: "gadget.e2e.example.com/g1 created\n"},
		{name: "the default is set and the unknown field gone", args: []string{"get", "gadget", "g1", "-o", "jsonpath={.spec}"},
			stdout: `{"color":"blue","replicas":1,"size":3}`},
		{name: "apply again", manifest: gadget, args: []string{"apply", "-f", "{file}"},
			stdout: "gadget.e2e.example.com/g1 configured\n"},
		{name: "out of range", args: []string{"patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"size":11}}`}, fails: true,
			stderr: "The Gadget \"g1\" is invalid: spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10\n"},
		{name: "a CEL rule fails", args: []string{"patch", "gadget", "g1", "--type=merge", "-p", `{"spec":{"size":7}}`}, fails: true,
			stderr: "The Gadget \"g1\" is invalid: spec: Invalid value: seven is unlucky\n"},
		{name: "strategic merge is refused", args: []string{"patch", "gadget", "g1", "-p", `{"spec":{"size":4}}`}, fails: true,
			stderr: "error: application/strategic-merge-patch+json is not supported by e2e.example.com/v1, Kind=Gadget: the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml\n"},
		{name: "printer columns", args: []string{"get", "gadgets"},
			stdout: "NAME   SIZE   AGE\ng1     3      <age>\n"},
		{name: "wide printer columns", args: []string{"get", "gd", "-o", "wide"},
			stdout: "NAME   SIZE   COLOR   AGE\ng1     3      blue    <age>\n"},
		// kubectl prefixes names with their kind only when the category's
		// lists are of several kinds; kplane's "all" has only gadgets.
		{name: "category all", args: []string{"get", "all"},
			stdout: "NAME   SIZE   AGE\ng1     3      <age>\n"},
		{name: "status through its subresource", args: []string{"patch", "gadget", "g1", "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":2}}`},
			stdout: "gadget.e2e.example.com/g1 patched\n"},
		{name: "status is not written through the main resource", args: []string{"patch", "gadget", "g1", "--type=merge", "-p", `{"status":{"replicas":9}}`},
			stdout: "gadget.e2e.example.com/g1 patched (no change)\n"},
		{name: "scale", args: []string{"scale", "gadget", "g1", "--replicas=4"},
			stdout: "gadget.e2e.example.com/g1 scaled\n"},
		{name: "after scale", args: []string{"get", "gadget", "g1", "-o", "jsonpath={.spec.replicas} {.status.replicas} {.metadata.generation}"},
			stdout: "4 2 2"},
	})
	t.Run("explain", func(t *testing.T) {
		eventuallyKubectl(t, 10*time.Second, func() error {
			out, errOut, err := sys.Kubectl(t, "explain", "gadgets.spec")
			if err != nil {
				return fmt.Errorf("kubectl explain: %v\n%s", err, errOut)
			}
			for _, want := range []string{"KIND:       Gadget", "VERSION:    v1", "FIELD: spec <Object>", "    What the gadget should be.", "  color\t<string>", "  size\t<integer>"} {
				if !slices.Contains(strings.Split(out, "\n"), want) {
					return fmt.Errorf("kubectl explain gadgets.spec lacks %q:\n%s", want, out)
				}
			}
			return nil
		})
	})
	runSteps(t, sys, "", []step{
		{name: "a missing namespace", manifest: gadget, args: []string{"-n", "nowhere", "create", "-f", "{file}"}, fails: true,
			stderr: "Error from server (NotFound): error when creating \"{file}\": namespaces \"nowhere\" not found\n"},
		{name: "delete the CRD and its objects", args: []string{"delete", "crd", "gadgets.e2e.example.com"},
			stdout: "customresourcedefinition.apiextensions.k8s.io \"gadgets.e2e.example.com\" deleted\n"},
		{name: "the CRD is gone", args: []string{"get", "crd", "gadgets.e2e.example.com"}, fails: true,
			stderr: "Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io \"gadgets.e2e.example.com\" not found\n"},
	})
	eventuallyKubectl(t, 10*time.Second, func() error {
		out, _, err := sys.Kubectl(t, "api-resources", "--api-group=e2e.example.com", "--no-headers")
		if err != nil || out != "" {
			return fmt.Errorf("api-resources after the CRD went: %q, %v", out, err)
		}
		_, errOut, err := sys.Kubectl(t, "-n", "crd", "get", "gadgets")
		if err == nil || errOut != "error: the server doesn't have a resource type \"gadgets\"\n" {
			return fmt.Errorf("get gadgets after the CRD went: %q, %v", errOut, err)
		}
		return nil
	})
	// The objects went with the CRD: a new CRD of the same name starts
	// empty.
	runSteps(t, sys, "crd", []step{
		{name: "recreate the CRD", manifest: gadgetsCRD, args: []string{"apply", "-f", "{file}"},
			stdout: "customresourcedefinition.apiextensions.k8s.io/gadgets.e2e.example.com created\n"},
		{name: "wait until established again", args: []string{"wait", "--for=condition=Established", "crd/gadgets.e2e.example.com", "--timeout=30s"},
			stdout: "customresourcedefinition.apiextensions.k8s.io/gadgets.e2e.example.com condition met\n"},
		{name: "the new CRD starts empty", args: []string{"get", "gadgets"},
			stderr: "No resources found in crd namespace.\n"},
	})
	// A CRD made again serves its objects from the moment it is
	// established: kubectl's apply and a burst of creates with client-go
	// follow each wait at once.
	dir := t.TempDir()
	crdFile, gadgetFile := filepath.Join(dir, "crd.yaml"), filepath.Join(dir, "gadget.yaml")
	for file, content := range map[string]string{crdFile: gadgetsCRD, gadgetFile: gadget} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gadgets := dynamicClient(t, unthrottled(sys.RESTConfig(t))).Resource(schema.GroupVersionResource{Group: "e2e.example.com", Version: "v1", Resource: "gadgets"}).Namespace("crd")
	for cycle := range 3 {
		for _, args := range [][]string{
			{"delete", "crd", "gadgets.e2e.example.com"},
			{"apply", "-f", crdFile},
			{"wait", "--for=condition=Established", "crd/gadgets.e2e.example.com", "--timeout=30s"},
			{"-n", "crd", "apply", "-f", gadgetFile},
		} {
			if out, errOut, err := sys.Kubectl(t, args...); err != nil {
				t.Fatalf("cycle %d: kubectl %v: %q %q, %v", cycle, args, out, errOut, err)
			}
		}
		for i := range 50 {
			g := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "e2e.example.com/v1", "kind": "Gadget",
				"metadata": map[string]any{"name": fmt.Sprintf("burst-%d", i)},
				"spec":     map[string]any{"size": int64(2)},
			}}
			if _, err := gadgets.Create(context.Background(), g, metav1.CreateOptions{}); err != nil {
				t.Fatalf("cycle %d: create %d right after the CRD was established: %v", cycle, i, err)
			}
		}
	}
	// The same for groups the API has never served: the gateway routes
	// and lists a new group only after crd registered it.
	for i := range 5 {
		group := fmt.Sprintf("fresh%d.e2e.example.com", i)
		crd := strings.ReplaceAll(gadgetsCRD, "e2e.example.com", group)
		obj := strings.ReplaceAll(gadget, "e2e.example.com", group)
		runSteps(t, sys, "crd", []step{
			{name: "create " + group, manifest: crd, args: []string{"apply", "-f", "{file}"},
				stdout: "customresourcedefinition.apiextensions.k8s.io/gadgets." + group + " created\n"},
			{name: "wait for " + group, args: []string{"wait", "--for=condition=Established", "crd/gadgets." + group, "--timeout=30s"},
				stdout: "customresourcedefinition.apiextensions.k8s.io/gadgets." + group + " condition met\n"},
			{name: "apply a gadget of " + group, manifest: obj, args: []string{"apply", "-f", "{file}"},
				stdout: "gadget." + group + "/g1 created\n"},
		})
	}
	t.Run("the resource list has a CRD only once it is established", func(t *testing.T) {
		resourceListOnlyEstablished(t, sys)
	})
}

// resourceListOnlyEstablished checks what kube's e2e fixtures count on:
// once /apis/<group>/<version> lists a new CRD's resource, the CRD is
// established, so the fixture's next update of the CRD does not conflict
// with the server's write of that condition.
func resourceListOnlyEstablished(t *testing.T, sys *harness.System) {
	cfg := unthrottled(sys.RESTConfig(t))
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 5 {
		group := fmt.Sprintf("listed%d.e2e.example.com", i)
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "gizmos." + group},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group, Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}}}},
			},
		}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", crd.Name, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			list, err := disco.ServerResourcesForGroupVersion(group + "/v1")
			if err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "gizmos" }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s/v1 does not list gizmos within 30s: %v", group, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !apihelpers.IsCRDConditionTrue(got, apiextensionsv1.Established) {
			t.Fatalf("%s/v1 lists gizmos before the CRD is established: %+v", group, got.Status.Conditions)
		}
	}
}
