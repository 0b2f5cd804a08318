package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"kplane.dev/test/e2e/harness"
)

// The Memo kind is what an operator author would write: Go types with
// hand-written deep copies, registered in a scheme, no code generation.
var (
	memoGV       = schema.GroupVersion{Group: "operator.e2e.example.com", Version: "v1"}
	memoResource = memoGV.WithResource("memos")
)

const (
	memoFinalizer = "operator.e2e.example.com/farewell"
	// farewellsMap is where the finalizer's cleanup leaves each deleted
	// memo's last text: a trace the test can read after the memo is gone.
	farewellsMap = "memo-farewells"
	// gcTimeout bounds the wait for core's garbage collector, which finds
	// a new custom resource when it rediscovers resources (every 30s).
	gcTimeout = 90 * time.Second
	// reconcileTimeout bounds the wait for the reconciler's reaction to a
	// change the test made.
	reconcileTimeout = 30 * time.Second
)

type memo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              memoSpec   `json:"spec"`
	Status            memoStatus `json:"status"`
}

type memoSpec struct {
	Text string `json:"text"`
}

type memoStatus struct {
	Length             int64 `json:"length"`
	ObservedGeneration int64 `json:"observedGeneration"`
}

type memoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []memo `json:"items"`
}

func (m *memo) deepCopyInto(out *memo) {
	*out = *m
	m.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

func (m *memo) DeepCopyObject() runtime.Object {
	out := &memo{}
	m.deepCopyInto(out)
	return out
}

func (l *memoList) DeepCopyObject() runtime.Object {
	out := &memoList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]memo, len(l.Items))
		for i := range l.Items {
			l.Items[i].deepCopyInto(&out.Items[i])
		}
	}
	return out
}

func memoScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	// Named explicitly: the Go types' names are not the kinds.
	s.AddKnownTypeWithName(memoGV.WithKind("Memo"), &memo{})
	s.AddKnownTypeWithName(memoGV.WithKind("MemoList"), &memoList{})
	metav1.AddToGroupVersion(s, memoGV)
	return s
}

var memosCRD = &apiextensionsv1.CustomResourceDefinition{
	ObjectMeta: metav1.ObjectMeta{Name: "memos.operator.e2e.example.com"},
	Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: memoGV.Group,
		Scope: apiextensionsv1.NamespaceScoped,
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "memos", Singular: "memo", Kind: "Memo", ListKind: "MemoList"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: memoGV.Version, Served: true, Storage: true,
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"text": {Type: "string"},
					}},
					"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"length":             {Type: "integer"},
						"observedGeneration": {Type: "integer"},
					}},
				},
			}},
		}},
	},
}

// memoReconciler keeps a memo's status and its ConfigMap in step with its
// text, and leaves a farewell when the memo is deleted.
type memoReconciler struct {
	client.Client
}

func (r *memoReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m memo
	if err := r.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&m, memoFinalizer) {
			return ctrl.Result{}, nil
		}
		if err := r.recordFarewell(ctx, &m); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(&m, memoFinalizer)
		return ctrl.Result{}, r.Update(ctx, &m)
	}
	if controllerutil.AddFinalizer(&m, memoFinalizer) {
		if err := r.Update(ctx, &m); err != nil {
			return ctrl.Result{}, err
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "memo-" + m.Name, Namespace: m.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"text": m.Spec.Text}
		return controllerutil.SetControllerReference(&m, cm, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	want := memoStatus{Length: int64(len(m.Spec.Text)), ObservedGeneration: m.Generation}
	if m.Status == want {
		return ctrl.Result{}, nil
	}
	m.Status = want
	return ctrl.Result{}, r.Status().Update(ctx, &m)
}

func (r *memoReconciler) recordFarewell(ctx context.Context, m *memo) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: farewellsMap, Namespace: m.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[m.Name] = m.Spec.Text
		return nil
	})
	return err
}

// setRuntimeLogger gives controller-runtime's process-wide logger, which
// its sources and clients log through and which can be set only once per
// process, a place to write: stderr, since no one test outlives it.
var setRuntimeLogger sync.Once

// startMemoOperator runs a controller-runtime manager against kplane's
// gateway, as an operator deployed beside kube would run, until the test
// ends.
func startMemoOperator(t *testing.T, sys *harness.System, ns string) {
	t.Helper()
	setRuntimeLogger.Do(func() {
		ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	})
	mgr, err := ctrl.NewManager(sys.RESTConfig(t), ctrl.Options{
		Scheme:                 memoScheme(t),
		Logger:                 testr.New(t),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		// go test -count=n builds the same controller again in one
		// process, which controller-runtime would refuse by its name.
		Controller: config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&memo{}).
		Owns(&corev1.ConfigMap{}).
		Complete(&memoReconciler{Client: mgr.GetClient()}); err != nil {
		t.Fatalf("build controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	// The manager stops before the system does (cleanups run last first)
	// and before the test ends, since it logs through t.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// TestOperator runs a controller-runtime operator, unchanged, on a CRD
// served by kplane: status through the subresource, an owned ConfigMap
// kept in step through the manager's watches, a finalizer's cleanup on
// deletion, then core's garbage collector removing the ConfigMap once its
// custom-resource owner is gone.
func TestOperator(t *testing.T) {
	sys := harness.Start(t)
	cfg := sys.RESTConfig(t)
	cs := clientset(t, cfg)
	dyn, err := dynamic.NewForConfig(unthrottled(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ext, err := apiextensionsclient.NewForConfig(unthrottled(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns = "operator"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, memosCRD, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	mustEventually(t, reconcileTimeout, "the CRD is established and discovered", func(ctx context.Context) error {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, memosCRD.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		}) {
			return fmt.Errorf("not established: %+v", crd.Status.Conditions)
		}
		_, err = cs.Discovery().ServerResourcesForGroupVersion(memoGV.String())
		return err
	})
	startMemoOperator(t, sys, ns)

	memos := dyn.Resource(memoResource).Namespace(ns)
	created, err := memos.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": memoGV.String(), "kind": "Memo",
		"metadata": map[string]any{"name": "m1"},
		"spec":     map[string]any{"text": "hello"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create memo: %v", err)
	}
	uid := created.GetUID()

	t.Run("status, finalizer and owned ConfigMap", func(t *testing.T) {
		waitMemoInStep(t, memos, cs, ns, "hello", 1)
		m, err := memos.Get(ctx, "m1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(m.GetFinalizers(), memoFinalizer) {
			t.Errorf("finalizers %v lack %s", m.GetFinalizers(), memoFinalizer)
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "memo-m1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []metav1.OwnerReference{{
			APIVersion: memoGV.String(), Kind: "Memo", Name: "m1", UID: uid,
			Controller: ptr(true), BlockOwnerDeletion: ptr(true),
		}}
		if !equalOwnerRefs(cm.OwnerReferences, want) {
			t.Errorf("owner references %+v, want %+v", cm.OwnerReferences, want)
		}
	})

	// Each reaction below needs the manager's informers to have seen the
	// test's write: the memo's for a spec change, the ConfigMap's for a
	// change to the owned object.
	t.Run("status and ConfigMap follow a spec update", func(t *testing.T) {
		if _, err := memos.Patch(ctx, "m1", types.MergePatchType, []byte(`{"spec":{"text":"hello, operator"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitMemoInStep(t, memos, cs, ns, "hello, operator", 2)
	})
	t.Run("a changed ConfigMap is put back", func(t *testing.T) {
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "memo-m1", types.MergePatchType, []byte(`{"data":{"text":"tampered"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitMemoInStep(t, memos, cs, ns, "hello, operator", 2)
	})

	t.Run("deletion runs the finalizer", func(t *testing.T) {
		if err := memos.Delete(ctx, "m1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		mustEventually(t, reconcileTimeout, "the memo goes", func(ctx context.Context) error {
			m, err := memos.Get(ctx, "m1", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("memo still there, finalizers %v", m.GetFinalizers())
		})
		// The cleanup ran before the finalizer was removed, so its trace
		// is there as soon as the memo is gone.
		farewells, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, farewellsMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := farewells.Data["m1"]; got != "hello, operator" {
			t.Errorf("farewell of m1 is %q, want %q", got, "hello, operator")
		}
	})

	t.Run("the owned ConfigMap is garbage-collected", func(t *testing.T) {
		mustEventually(t, gcTimeout, "the owned ConfigMap goes", func(ctx context.Context) error {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "memo-m1", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("ConfigMap memo-m1 still there, owners %+v", cm.OwnerReferences)
		})
	})
}

// waitMemoInStep waits until memo m1's status and ConfigMap reflect text
// at generation.
func waitMemoInStep(t *testing.T, memos dynamic.ResourceInterface, cs *kubernetes.Clientset, ns, text string, generation int64) {
	t.Helper()
	mustEventually(t, reconcileTimeout, "the memo's status and ConfigMap follow its text", func(ctx context.Context) error {
		m, err := memos.Get(ctx, "m1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if g := m.GetGeneration(); g != generation {
			return fmt.Errorf("generation %d, want %d", g, generation)
		}
		length, _, _ := unstructured.NestedInt64(m.Object, "status", "length")
		observed, _, _ := unstructured.NestedInt64(m.Object, "status", "observedGeneration")
		if length != int64(len(text)) || observed != generation {
			return fmt.Errorf("status %v, want length %d at generation %d", m.Object["status"], len(text), generation)
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "memo-m1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["text"] != text {
			return fmt.Errorf("ConfigMap data %v, want text %q", cm.Data, text)
		}
		return nil
	})
}

func equalOwnerRefs(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			isTrue(x.Controller) == isTrue(y.Controller) && isTrue(x.BlockOwnerDeletion) == isTrue(y.BlockOwnerDeletion)
	})
}

func isTrue(b *bool) bool { return b != nil && *b }

func mustEventually(t *testing.T, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	if err := eventually(context.Background(), timeout, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
