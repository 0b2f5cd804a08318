package kinds_test

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/storage/cacher"
	"kplane.dev/services/core/internal/kinds"
)

// wait bounds every wait for something that should happen promptly; it is
// only reached when a test fails.
const wait = 10 * time.Second

const ns = "it"

// serve starts a server of every kind core serves, on a real etcd behind
// watch caches, and returns a client config for it.
func serve(t *testing.T) *restclient.Config {
	t.Helper()
	resources, err := kinds.Resources(nil)
	if err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{
		Resources: resources,
		Cacher:    []cacher.Option{cacher.WithBookmarkInterval(100 * time.Millisecond)},
		Configure: func(o *server.Options) error {
			o.Stores = kinds.Stores(o.Stores)
			return nil
		},
	}).Config
}

// typedClient is what every typed client-go client of one kind offers.
type typedClient[T runtime.Object, L runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// roundTrip creates obj, reads it, lists it, updates a label on it and
// deletes it, checking each step.
func roundTrip[T runtime.Object, L runtime.Object](t *testing.T, c typedClient[T, L], obj T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	created, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	m, err := meta.Accessor(created)
	if err != nil {
		t.Fatal(err)
	}
	name := m.GetName()
	got, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if n := meta.LenList(list); n != 1 {
		t.Fatalf("list has %d items, want 1", n)
	}
	gm, _ := meta.Accessor(got)
	gm.SetLabels(map[string]string{"updated": "yes"})
	updated, err := c.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if um, _ := meta.Accessor(updated); um.GetLabels()["updated"] != "yes" || um.GetResourceVersion() == m.GetResourceVersion() {
		t.Fatalf("update did not take: labels %v, resourceVersion %s", um.GetLabels(), um.GetResourceVersion())
	}
	if err := c.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// An object with finalizers (a namespace's spec.finalizers) stays,
	// marked for deletion, until its finalizers are done.
	after, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatalf("get after delete: %v", err)
	default:
		if am, _ := meta.Accessor(after); am.GetDeletionTimestamp() == nil {
			t.Fatalf("get after delete: object is still there, not marked for deletion")
		}
	}
}

func om(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func ptr[T any](v T) *T { return &v }

func newCoreEvent(name string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "cm"},
		Reason:         "Tested",
		Message:        "core event",
		Source:         corev1.EventSource{Component: "tester"},
		Type:           corev1.EventTypeNormal,
		Count:          1,
	}
}

func newEvent(name string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: ns},
		EventTime:           metav1.NewMicroTime(time.Now().Truncate(time.Microsecond)),
		ReportingController: "example.com/tester",
		ReportingInstance:   "tester-1",
		Action:              "Test",
		Reason:              "Tested",
		Regarding:           corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "cm"},
		Note:                "events.k8s.io event",
		Type:                corev1.EventTypeNormal,
	}
}

func TestEveryKind(t *testing.T) {
	config := serve(t)
	cs := kubernetes.NewForConfigOrDie(config)
	agg := aggregatorclient.NewForConfigOrDie(config)
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	never := admissionregistrationv1.NeverReinvocationPolicy
	all := admissionregistrationv1.AllScopes
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}, Scope: &all},
	}}
	clientConfig := admissionregistrationv1.WebhookClientConfig{URL: ptr("https://example.com/hook")}
	match := &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, MatchPolicy: &equivalent,
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rules[0]}},
	}
	policyRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}

	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"namespaces", func(t *testing.T) { roundTrip(t, cs.CoreV1().Namespaces(), &corev1.Namespace{ObjectMeta: om("it-ns")}) }},
		{"configmaps", func(t *testing.T) {
			roundTrip(t, cs.CoreV1().ConfigMaps(ns), &corev1.ConfigMap{ObjectMeta: om("cm"), Data: map[string]string{"a": "1"}})
		}},
		{"secrets", func(t *testing.T) {
			roundTrip(t, cs.CoreV1().Secrets(ns), &corev1.Secret{ObjectMeta: om("s"), StringData: map[string]string{"a": "1"}})
		}},
		{"serviceaccounts", func(t *testing.T) {
			roundTrip(t, cs.CoreV1().ServiceAccounts(ns), &corev1.ServiceAccount{ObjectMeta: om("sa")})
		}},
		{"events", func(t *testing.T) { roundTrip(t, cs.CoreV1().Events(ns), newCoreEvent("core")) }},
		{"leases", func(t *testing.T) {
			roundTrip(t, cs.CoordinationV1().Leases(ns), &coordinationv1.Lease{ObjectMeta: om("l"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("me"), LeaseDurationSeconds: ptr[int32](15)}})
		}},
		{"events.events.k8s.io", func(t *testing.T) { roundTrip(t, cs.EventsV1().Events(ns), newEvent("new")) }},
		{"roles", func(t *testing.T) {
			roundTrip(t, cs.RbacV1().Roles(ns), &rbacv1.Role{ObjectMeta: om("r"), Rules: policyRules})
		}},
		{"rolebindings", func(t *testing.T) {
			roundTrip(t, cs.RbacV1().RoleBindings(ns), &rbacv1.RoleBinding{ObjectMeta: om("rb"), Subjects: subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"}})
		}},
		{"clusterroles", func(t *testing.T) {
			roundTrip(t, cs.RbacV1().ClusterRoles(), &rbacv1.ClusterRole{ObjectMeta: om("cr"), Rules: policyRules})
		}},
		{"clusterrolebindings", func(t *testing.T) {
			roundTrip(t, cs.RbacV1().ClusterRoleBindings(), &rbacv1.ClusterRoleBinding{ObjectMeta: om("crb"), Subjects: subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cr"}})
		}},
		{"mutatingwebhookconfigurations", func(t *testing.T) {
			roundTrip(t, cs.AdmissionregistrationV1().MutatingWebhookConfigurations(), &admissionregistrationv1.MutatingWebhookConfiguration{
				ObjectMeta: om("m"),
				Webhooks: []admissionregistrationv1.MutatingWebhook{{
					Name: "m.example.com", ClientConfig: clientConfig, Rules: rules, FailurePolicy: &fail, MatchPolicy: &equivalent,
					NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, SideEffects: &none,
					TimeoutSeconds: ptr[int32](10), AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: &never,
				}},
			})
		}},
		{"validatingwebhookconfigurations", func(t *testing.T) {
			roundTrip(t, cs.AdmissionregistrationV1().ValidatingWebhookConfigurations(), &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: om("v"),
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{
					Name: "v.example.com", ClientConfig: clientConfig, Rules: rules, FailurePolicy: &fail, MatchPolicy: &equivalent,
					NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, SideEffects: &none,
					TimeoutSeconds: ptr[int32](10), AdmissionReviewVersions: []string{"v1"},
				}},
			})
		}},
		{"validatingadmissionpolicies", func(t *testing.T) {
			roundTrip(t, cs.AdmissionregistrationV1().ValidatingAdmissionPolicies(), &admissionregistrationv1.ValidatingAdmissionPolicy{
				ObjectMeta: om("p"),
				Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
					MatchConstraints: match, FailurePolicy: &fail,
					Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
				},
			})
		}},
		{"validatingadmissionpolicybindings", func(t *testing.T) {
			roundTrip(t, cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings(), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
				ObjectMeta: om("pb"),
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
					PolicyName: "p", MatchResources: match,
					ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				},
			})
		}},
		{"mutatingadmissionpolicies", func(t *testing.T) {
			roundTrip(t, cs.AdmissionregistrationV1().MutatingAdmissionPolicies(), &admissionregistrationv1.MutatingAdmissionPolicy{
				ObjectMeta: om("mp"),
				Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
					MatchConstraints: match, FailurePolicy: &fail, ReinvocationPolicy: never,
					Mutations: []admissionregistrationv1.Mutation{{
						PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
						ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{labels: {"a": "b"}}}`},
					}},
				},
			})
		}},
		{"mutatingadmissionpolicies generation", func(t *testing.T) {
			// A spec change counts a generation; a label change does not.
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			c := cs.AdmissionregistrationV1().MutatingAdmissionPolicies()
			p, err := c.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
				ObjectMeta: om("mp-gen"),
				Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
					MatchConstraints: match, ReinvocationPolicy: never,
					Mutations: []admissionregistrationv1.Mutation{{
						PatchType: admissionregistrationv1.PatchTypeJSONPatch,
						JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/data/a", value: "b"}]`},
					}},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if p.Generation != 1 || p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != fail {
				t.Fatalf("created generation %d, failurePolicy %v; want 1 and the default Fail", p.Generation, p.Spec.FailurePolicy)
			}
			p.Labels = map[string]string{"a": "b"}
			if p, err = c.Update(ctx, p, metav1.UpdateOptions{}); err != nil || p.Generation != 1 {
				t.Fatalf("label update: generation %d, error %v; want 1", p.Generation, err)
			}
			p.Spec.ReinvocationPolicy = admissionregistrationv1.IfNeededReinvocationPolicy
			if p, err = c.Update(ctx, p, metav1.UpdateOptions{}); err != nil || p.Generation != 2 {
				t.Fatalf("spec update: generation %d, error %v; want 2", p.Generation, err)
			}
			p.Spec.Mutations[0].JSONPatch.Expression = "'not a patch'"
			_, err = c.Update(ctx, p, metav1.UpdateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("update to an expression of the wrong type: %v, want Invalid", err)
			}
			if err := c.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}},
		{"mutatingadmissionpolicybindings", func(t *testing.T) {
			roundTrip(t, cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings(), &admissionregistrationv1.MutatingAdmissionPolicyBinding{
				ObjectMeta: om("mpb"),
				Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "mp", MatchResources: match},
			})
		}},
		{"apiservices", func(t *testing.T) {
			roundTrip(t, agg.ApiregistrationV1().APIServices(), &apiregistrationv1.APIService{
				ObjectMeta: om("v1.example.com"),
				Spec: apiregistrationv1.APIServiceSpec{
					Group: "example.com", Version: "v1", GroupPriorityMinimum: 100, VersionPriority: 10,
					Service:               &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Port: ptr[int32](443)},
					InsecureSkipTLSVerify: true,
				},
			})
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

func TestConfigMapInvalid(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(serve(t))
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: om("x"), Data: map[string]string{"a b": "1"}}, metav1.CreateOptions{})
	want := `ConfigMap "x" is invalid: data[a b]: Invalid value: "a b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Fatalf("create: %v\nwant 422 %s", err, want)
	}
}

// next returns the next watch event, failing the test after wait.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch ended")
		}
		return e
	case <-time.After(wait):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

func TestEventsServedByBothGroups(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(serve(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	coreWatch, err := cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer coreWatch.Stop()
	newWatch, err := cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer newWatch.Stop()

	t.Run("events.k8s.io event read through core", func(t *testing.T) {
		created, err := cs.EventsV1().Events(ns).Create(ctx, newEvent("from-new"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Events(ns).Get(ctx, "from-new", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Message != created.Note || got.InvolvedObject != created.Regarding || got.ReportingController != created.ReportingController ||
			!got.EventTime.Equal(&created.EventTime) || got.ResourceVersion != created.ResourceVersion || got.UID != created.UID {
			t.Fatalf("core view %+v\ndoes not match %+v", got, created)
		}
		for _, w := range []struct {
			name string
			w    watch.Interface
		}{{"core", coreWatch}, {"events.k8s.io", newWatch}} {
			e := next(t, w.w)
			m, err := meta.Accessor(e.Object)
			if e.Type != watch.Added || err != nil || m.GetName() != "from-new" {
				t.Fatalf("%s watch: %s %T, want ADDED from-new", w.name, e.Type, e.Object)
			}
		}
	})

	t.Run("core event read through events.k8s.io", func(t *testing.T) {
		created, err := cs.CoreV1().Events(ns).Create(ctx, newCoreEvent("from-core"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cs.EventsV1().Events(ns).Get(ctx, "from-core", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Note != created.Message || got.Regarding != created.InvolvedObject || got.DeprecatedSource != created.Source ||
			got.DeprecatedCount != created.Count || got.ResourceVersion != created.ResourceVersion {
			t.Fatalf("events.k8s.io view %+v\ndoes not match %+v", got, created)
		}
		e := next(t, newWatch)
		ev, ok := e.Object.(*eventsv1.Event)
		if e.Type != watch.Added || !ok || ev.Name != "from-core" || ev.Note != "core event" || ev.DeprecatedSource.Component != "tester" {
			t.Fatalf("events.k8s.io watch: %s %+v, want ADDED from-core", e.Type, e.Object)
		}
		if e := next(t, coreWatch); e.Type != watch.Added {
			t.Fatalf("core watch: %s, want ADDED", e.Type)
		}

		list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=cm,reportingController=example.com/tester"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "from-new" {
			t.Fatalf("field-selected list: %d items, want from-new alone", len(list.Items))
		}
		coreList, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "source=tester"})
		if err != nil {
			t.Fatal(err)
		}
		if len(coreList.Items) != 1 || coreList.Items[0].Name != "from-core" {
			t.Fatalf("field-selected core list: %d items, want from-core alone", len(coreList.Items))
		}
	})

	t.Run("update and delete through the other group", func(t *testing.T) {
		ev, err := cs.EventsV1().Events(ns).Get(ctx, "from-core", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev.Labels = map[string]string{"seen": "yes"}
		if _, err := cs.EventsV1().Events(ns).Update(ctx, ev, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if e := next(t, coreWatch); e.Type != watch.Modified || e.Object.(*corev1.Event).Labels["seen"] != "yes" {
			t.Fatalf("core watch: %s %+v, want MODIFIED with the label", e.Type, e.Object)
		}
		if err := cs.CoreV1().Events(ns).Delete(ctx, "from-new", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		next(t, newWatch) // the MODIFIED of from-core
		if e := next(t, newWatch); e.Type != watch.Deleted || e.Object.(*eventsv1.Event).Name != "from-new" {
			t.Fatalf("events.k8s.io watch: %s %+v, want DELETED from-new", e.Type, e.Object)
		}
	})
}

func TestEventsValidatedPerGroup(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(serve(t))
	ev := newEvent("bad")
	ev.Type = "Odd"
	_, err := cs.EventsV1().Events(ns).Create(context.Background(), ev, metav1.CreateOptions{})
	want := `Event.events.k8s.io "bad" is invalid: type: Invalid value: "": has invalid value: Odd`
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Fatalf("create: %v\nwant %s", err, want)
	}
	core := newCoreEvent("odd")
	core.Type = "Odd"
	if _, err := cs.CoreV1().Events(ns).Create(context.Background(), core, metav1.CreateOptions{}); err != nil {
		t.Fatalf("core/v1 keeps legacy validation, create: %v", err)
	}
}

// TestNamespaceStatusKeepsMetadata shows kube's namespace status
// strategy: a patch through /status changes status and metadata (an
// annotation set with it is kept), never spec.
func TestNamespaceStatusKeepsMetadata(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(serve(t))
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: om("status-ns")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"annotations":{"patched":"yes"}},"spec":{"finalizers":[]},"status":{"conditions":[{"type":"StatusPatch","status":"True","reason":"E2E","message":"patched"}]}}`
	ns, err := cs.CoreV1().Namespaces().Patch(ctx, "status-ns", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if ns.Annotations["patched"] != "yes" || len(ns.Status.Conditions) != 1 || ns.Status.Conditions[0].Type != "StatusPatch" {
		t.Errorf("after the status patch: annotations %v, conditions %+v; want both changed", ns.Annotations, ns.Status.Conditions)
	}
	if len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != corev1.FinalizerKubernetes {
		t.Errorf("spec.finalizers %v changed through /status", ns.Spec.Finalizers)
	}
}
