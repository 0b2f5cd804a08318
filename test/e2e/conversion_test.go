package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"kplane.dev/libs/pki"
	"kplane.dev/test/e2e/harness"
)

// The conversion webhook's service, as a CRD names it; the cluster DNS
// name kube dials and verifies for it is <name>.<namespace>.svc.
const (
	webhookNamespace = "webhooks"
	webhookService   = "convert"
	webhookHost      = webhookService + "." + webhookNamespace + ".svc"
)

// Paths of the webhook: one the CRD reaches by url, one by service, so
// that the test sees which way a conversion came.
const (
	urlPath     = "/convert"
	servicePath = "/service-convert"
)

// conversionWebhook is a ConversionReview v1 server over HTTPS between
// v1, where the size is spec.size, and v2, where it is
// spec.dimensions.size.
type conversionWebhook struct {
	*httptest.Server
	// caBundle is the PEM of the CA the server's certificate chains to.
	caBundle []byte

	mu   sync.Mutex
	hits map[string]int
}

// newConversionWebhook starts the webhook with a certificate from a CA of
// its own, valid for 127.0.0.1 and for the service's DNS name.
func newConversionWebhook(t *testing.T) *conversionWebhook {
	t.Helper()
	ca, err := pki.NewCA("e2e-webhook-ca", time.Now())
	if err != nil {
		t.Fatalf("make the webhook CA: %v", err)
	}
	cert, err := ca.Serving("e2e-webhook", []string{webhookHost}, time.Now())
	if err != nil {
		t.Fatalf("issue the webhook certificate: %v", err)
	}
	w := &conversionWebhook{caBundle: ca.CertPEM(), hits: map[string]int{}}
	w.Server = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	w.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLSCertificate()}}
	w.StartTLS()
	t.Cleanup(w.Close)
	return w
}

// hitsOf is how many reviews path answered.
func (w *conversionWebhook) hitsOf(path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hits[path]
}

func (w *conversionWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Request    struct {
			UID               string           `json:"uid"`
			DesiredAPIVersion string           `json:"desiredAPIVersion"`
			Objects           []map[string]any `json:"objects"`
		} `json:"request"`
	}
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(rw, fmt.Sprintf("read the ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	w.hits[r.URL.Path]++
	w.mu.Unlock()
	converted := make([]map[string]any, 0, len(review.Request.Objects))
	for _, obj := range review.Request.Objects {
		converted = append(converted, convertThing(obj, review.Request.DesiredAPIVersion))
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "ConversionReview",
		"response": map[string]any{
			"uid":              review.Request.UID,
			"convertedObjects": converted,
			"result":           map[string]any{"status": "Success"},
		},
	})
}

// convertThing moves the size between spec.size (v1) and
// spec.dimensions.size (v2).
func convertThing(obj map[string]any, to string) map[string]any {
	u := &unstructured.Unstructured{Object: obj}
	switch to {
	case "e2e.example.com/v2":
		if size, ok, _ := unstructured.NestedFieldCopy(obj, "spec", "size"); ok {
			unstructured.RemoveNestedField(obj, "spec", "size")
			_ = unstructured.SetNestedField(obj, size, "spec", "dimensions", "size")
		}
	case "e2e.example.com/v1":
		if size, ok, _ := unstructured.NestedFieldCopy(obj, "spec", "dimensions", "size"); ok {
			unstructured.RemoveNestedField(obj, "spec", "dimensions")
			_ = unstructured.SetNestedField(obj, size, "spec", "size")
		}
	}
	u.SetAPIVersion(to)
	return u.Object
}

// twoVersionCRD is a CRD of kind, stored in v1 and served in v1 and v2,
// converted by conversion (a CustomResourceConversion as YAML, indented
// for spec.conversion). v2 knows spec.size too, so that strategy None,
// which moves no field, keeps it.
func twoVersionCRD(plural, kind, conversion string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.e2e.example.com
spec:
  group: e2e.example.com
  scope: Namespaced
  names:
    plural: %[1]s
    singular: %[3]s
    kind: %[2]s
  conversion:
%[4]s
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
              dimensions:
                type: object
                properties:
                  size:
                    type: integer
`, plural, kind, strings.ToLower(kind), conversion)
}

// webhookConversion is spec.conversion with clientConfig (YAML indented
// for spec.conversion.webhook.clientConfig).
func webhookConversion(clientConfig string, caBundle []byte) string {
	return fmt.Sprintf(`    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        caBundle: %s
%s`, base64.StdEncoding.EncodeToString(caBundle), clientConfig)
}

// TestConversion serves CRDs of two versions, stored in v1, through a
// conversion webhook the test runs, reached by url and by service (found
// through crd's --service-map), and through strategy None, and reads and
// writes them in both versions with client-go's dynamic client and
// kubectl.
func TestConversion(t *testing.T) {
	hook := newConversionWebhook(t)
	sys := harness.Start(t, harness.WithArgs("crd", fmt.Sprintf("--service-map=%s/%s=%s", webhookNamespace, webhookService, hook.URL)))
	dyn, err := dynamic.NewForConfig(sys.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, sys, "conversion")

	byURL := webhookConversion(fmt.Sprintf("        url: %s%s\n", hook.URL, urlPath), hook.caBundle)
	byService := webhookConversion(fmt.Sprintf("        service:\n          namespace: %s\n          name: %s\n          path: %s\n", webhookNamespace, webhookService, servicePath), hook.caBundle)
	for _, crd := range []string{
		twoVersionCRD("things", "Thing", byURL),
		twoVersionCRD("gizmos", "Gizmo", byService),
		twoVersionCRD("plains", "Plain", "    strategy: None\n"),
	} {
		createCRD(t, sys, dyn, crd)
	}

	things := func(version string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "e2e.example.com", Version: version, Resource: "things"}).Namespace("conversion")
	}
	ctx := t.Context()

	t.Run("create in v1, read in v2 and v1", func(t *testing.T) {
		if _, err := things("v1").Create(ctx, thing("v1", "t1", 3), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create t1 in v1: %v", err)
		}
		wantThing(t, things("v2"), "t1", "v2", 3)
		wantThing(t, things("v1"), "t1", "v1", 3)
	})
	t.Run("create in v2, read in v1", func(t *testing.T) {
		if _, err := things("v2").Create(ctx, thing("v2", "t2", 5), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create t2 in v2: %v", err)
		}
		wantThing(t, things("v1"), "t2", "v1", 5)
		wantThing(t, things("v2"), "t2", "v2", 5)
	})
	t.Run("list and watch in v2", func(t *testing.T) {
		list, err := things("v2").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list in v2: %v", err)
		}
		got := map[string]int64{}
		for _, item := range list.Items {
			if item.GetAPIVersion() != "e2e.example.com/v2" {
				t.Errorf("listed %s in %s, want e2e.example.com/v2", item.GetName(), item.GetAPIVersion())
			}
			got[item.GetName()] = v2Size(&item)
		}
		if want := map[string]int64{"t1": 3, "t2": 5}; !maps.Equal(got, want) {
			t.Errorf("listed sizes %v, want %v", got, want)
		}
		w, err := things("v2").Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatalf("watch in v2: %v", err)
		}
		defer w.Stop()
		if _, err := things("v1").Create(ctx, thing("v1", "t3", 7), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create t3 in v1: %v", err)
		}
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended before its event")
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if ev.Type != watch.Added || !isObj {
				t.Fatalf("watch event %s %T, want ADDED of a Thing", ev.Type, ev.Object)
			}
			if u.GetName() != "t3" || u.GetAPIVersion() != "e2e.example.com/v2" || v2Size(u) != 7 {
				t.Errorf("watched %s %s size %d, want t3 e2e.example.com/v2 size 7", u.GetName(), u.GetAPIVersion(), v2Size(u))
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event for t3")
		}
	})
	t.Run("update through v2 keeps the data", func(t *testing.T) {
		u, err := things("v2").Get(ctx, "t1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get t1 in v2: %v", err)
		}
		if err := unstructured.SetNestedField(u.Object, int64(4), "spec", "dimensions", "size"); err != nil {
			t.Fatal(err)
		}
		u.SetLabels(map[string]string{"updated": "v2"})
		if _, err := things("v2").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update t1 in v2: %v", err)
		}
		got := wantThing(t, things("v1"), "t1", "v1", 4)
		if got == nil {
			return
		}
		if got.GetLabels()["updated"] != "v2" {
			t.Errorf("t1 in v1 has labels %v, want updated=v2", got.GetLabels())
		}
		// kube's field manager keeps an Update entry per manager and
		// version: the creator's, in v1, stays (read in v2 through the
		// webhook to see which of its fields the update took), and the
		// update's is in v2.
		managed := got.GetManagedFields()
		versions := map[string]string{}
		for _, m := range managed {
			if m.Operation == metav1.ManagedFieldsOperationUpdate && m.FieldsV1 != nil {
				versions[m.APIVersion] = string(m.FieldsV1.Raw)
			}
		}
		const want = `{"f:metadata":{"f:labels":{".":{},"f:updated":{}}},"f:spec":{"f:dimensions":{"f:size":{}}}}`
		if _, ok := versions["e2e.example.com/v1"]; len(managed) != 2 || !ok || versions["e2e.example.com/v2"] != want {
			data, _ := json.Marshal(managed)
			t.Errorf("t1's managedFields %s, want the create's Update in e2e.example.com/v1 and the update's in e2e.example.com/v2 of %s", data, want)
		}
	})
	t.Run("stored versions", func(t *testing.T) {
		crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
		crd, err := crds.Get(ctx, "things.e2e.example.com", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the CRD: %v", err)
		}
		if got, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions"); !slices.Equal(got, []string{"v1"}) {
			t.Errorf("status.storedVersions %q, want [v1]", got)
		}
	})
	t.Run("service reference through the service map", func(t *testing.T) {
		gizmos := func(version string) dynamic.ResourceInterface {
			return dyn.Resource(schema.GroupVersionResource{Group: "e2e.example.com", Version: version, Resource: "gizmos"}).Namespace("conversion")
		}
		before := hook.hitsOf(servicePath)
		g := thing("v2", "g1", 6)
		g.SetKind("Gizmo")
		if _, err := gizmos("v2").Create(ctx, g, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create g1 in v2: %v", err)
		}
		wantThing(t, gizmos("v1"), "g1", "v1", 6)
		wantThing(t, gizmos("v2"), "g1", "v2", 6)
		if hook.hitsOf(servicePath) == before {
			t.Errorf("the webhook answered nothing on %s: the service was not resolved through --service-map", servicePath)
		}
	})
	t.Run("strategy None rewrites apiVersion only", func(t *testing.T) {
		plains := func(version string) dynamic.ResourceInterface {
			return dyn.Resource(schema.GroupVersionResource{Group: "e2e.example.com", Version: version, Resource: "plains"}).Namespace("conversion")
		}
		p := thing("v1", "p1", 2)
		p.SetKind("Plain")
		if _, err := plains("v1").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create p1 in v1: %v", err)
		}
		got, err := plains("v2").Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get p1 in v2: %v", err)
		}
		spec, _, _ := unstructured.NestedMap(got.Object, "spec")
		if got.GetAPIVersion() != "e2e.example.com/v2" || !maps.Equal(spec, map[string]any{"size": int64(2)}) {
			t.Errorf("p1 in v2: %s spec %v, want e2e.example.com/v2 spec map[size:2]", got.GetAPIVersion(), spec)
		}
	})
	// kubectl finds things.v2 in the gateway's discovery, which follows
	// the CRDs' APIServices within a second.
	eventuallyKubectl(t, 10*time.Second, func() error {
		out, errOut, err := sys.Kubectl(t, "-n", "conversion", "get", "things.v2.e2e.example.com", "-o", "name")
		if err != nil {
			return fmt.Errorf("kubectl get things.v2.e2e.example.com: %v\n%s%s", err, out, errOut)
		}
		return nil
	})
	runSteps(t, sys, "conversion", []step{
		{name: "kubectl reads in v2 what was created in v1", args: []string{"get", "things.v2.e2e.example.com", "t1", "-o", "jsonpath={.apiVersion} {.spec}"},
			stdout: `e2e.example.com/v2 {"dimensions":{"size":4}}`},
		{name: "kubectl creates in v2", manifest: "apiVersion: e2e.example.com/v2\nkind: Thing\nmetadata:\n  name: t4\nspec:\n  dimensions:\n    size: 9\n",
			args: []string{"apply", "-f", "{file}"}, stdout: "thing.e2e.example.com/t4 created\n"},
		{name: "kubectl reads in v1 what was created in v2", args: []string{"get", "things.v1.e2e.example.com", "t4", "-o", "jsonpath={.apiVersion} {.spec}"},
			stdout: `e2e.example.com/v1 {"size":9}`},
		{name: "kubectl lists in v2", args: []string{"get", "things.v2.e2e.example.com", "-o", "custom-columns=NAME:.metadata.name,VERSION:.apiVersion,SIZE:.spec.dimensions.size"},
			stdout: "NAME   VERSION              SIZE\nt1     e2e.example.com/v2   4\nt2     e2e.example.com/v2   5\nt3     e2e.example.com/v2   7\nt4     e2e.example.com/v2   9\n"},
		{name: "kubectl reads the stored versions", args: []string{"get", "crd", "things.e2e.example.com", "-o", "jsonpath={.status.storedVersions}"},
			stdout: `["v1"]`},
	})
	t.Run("kubectl watches in v2", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rows := streamKubectl(ctx, t, sys, "-n", "conversion", "get", "things.v2.e2e.example.com", "-w", "--output-watch-events",
			"-o", `jsonpath={.type} {.object.metadata.name} {.object.apiVersion} {.object.spec.dimensions.size}{"\n"}`)
		want := func(row string) {
			t.Helper()
			select {
			case got, ok := <-rows:
				if !ok || got != row {
					t.Fatalf("kubectl get -w printed %q (open %v), want %q", got, ok, row)
				}
			case <-ctx.Done():
				t.Fatalf("kubectl get -w printed nothing in time, want %q", row)
			}
		}
		// The listed objects come first, then what is created in v1.
		for _, row := range []string{"ADDED t1 e2e.example.com/v2 4", "ADDED t2 e2e.example.com/v2 5", "ADDED t3 e2e.example.com/v2 7", "ADDED t4 e2e.example.com/v2 9"} {
			want(row)
		}
		if _, err := things("v1").Create(ctx, thing("v1", "t6", 8), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create t6 in v1: %v", err)
		}
		want("ADDED t6 e2e.example.com/v2 8")
	})

	t.Run("webhook down", func(t *testing.T) {
		hook.Close()
		// kube-apiserver answers the converter's error, which is no API
		// status, as a 500 of unknown reason with the converter's message:
		// the version and kind converted from, and the failed call.
		failed := func(from string) string {
			return fmt.Sprintf(`conversion webhook for e2e.example.com/%s, Kind=Thing failed: Post "%s%s?timeout=30s": `, from, hook.URL, urlPath)
		}
		_, err := things("v2").Get(ctx, "t1", metav1.GetOptions{})
		wantConversionFailed(t, "get t1 in v2", err, failed("v1"))
		_, err = things("v2").Create(ctx, thing("v2", "t5", 1), metav1.CreateOptions{})
		wantConversionFailed(t, "create t5 in v2", err, failed("v2"))
		_, errOut, err := sys.Kubectl(t, "-n", "conversion", "get", "things.v2.e2e.example.com", "t1")
		if want := "Error from server: " + failed("v1"); err == nil || !strings.HasPrefix(errOut, want) {
			t.Errorf("kubectl get with the webhook down: %v, stderr %q, want it to start %q", err, errOut, want)
		}
		// v1 is the storage version: reading it needs no conversion.
		wantThing(t, things("v1"), "t1", "v1", 4)
	})
}

// wantConversionFailed checks that what did failed as kube-apiserver
// fails when the conversion webhook does, with a message starting want.
func wantConversionFailed(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), want) || statusCode(err) != http.StatusInternalServerError || apierrors.ReasonForError(err) != metav1.StatusReasonUnknown {
		t.Errorf("%s with the webhook down: %v (reason %q, code %d), want a 500 of unknown reason starting %q", what, err, apierrors.ReasonForError(err), statusCode(err), want)
	}
}

// createCRD creates the CRD manifest and waits until its custom resources
// are served.
func createCRD(t *testing.T, sys *harness.System, dyn dynamic.Interface, manifest string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("read CRD manifest: %v", err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", u.GetName(), err)
	}
	if _, errOut, err := sys.Kubectl(t, "wait", "--for=condition=Established", "crd/"+u.GetName(), "--timeout=30s"); err != nil {
		t.Fatalf("wait for CRD %s: %v\n%s", u.GetName(), err, errOut)
	}
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	for _, version := range []string{"v1", "v2"} {
		r := dyn.Resource(schema.GroupVersionResource{Group: "e2e.example.com", Version: version, Resource: plural}).Namespace("conversion")
		// The gateway routes the CRD's group once crd registered its
		// APIServices.
		if err := eventually(t.Context(), 30*time.Second, func(ctx context.Context) error {
			_, err := r.List(ctx, metav1.ListOptions{})
			return err
		}); err != nil {
			t.Fatalf("%s %s not served: %v", plural, version, err)
		}
	}
}

// thing is a Thing in version with the size where that version keeps it.
func thing(version, name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size}}}
	if version == "v2" {
		u.Object["spec"] = map[string]any{"dimensions": map[string]any{"size": size}}
	}
	u.SetAPIVersion("e2e.example.com/" + version)
	u.SetKind("Thing")
	u.SetName(name)
	return u
}

// wantThing reads name through r and checks its version and size.
func wantThing(t *testing.T, r dynamic.ResourceInterface, name, version string, size int64) *unstructured.Unstructured {
	t.Helper()
	u, err := r.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("get %s in %s: %v", name, version, err)
		return nil
	}
	got := v2Size(u)
	if version == "v1" {
		got, _, _ = unstructured.NestedInt64(u.Object, "spec", "size")
	}
	if u.GetAPIVersion() != "e2e.example.com/"+version || got != size {
		t.Errorf("get %s in %s: %s %v, want e2e.example.com/%s size %d", name, version, u.GetAPIVersion(), u.Object["spec"], version, size)
	}
	return u
}

func v2Size(u *unstructured.Unstructured) int64 {
	size, _, _ := unstructured.NestedInt64(u.Object, "spec", "dimensions", "size")
	return size
}

func statusCode(err error) int {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return int(s.Status().Code)
	}
	return 0
}
