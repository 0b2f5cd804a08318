package nslifecycle_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/nslifecycle"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
	"kplane.dev/libs/storage/etcd3"
)

var (
	nsKeys     = storage.NewKeys("/kplane", "", "namespaces")
	configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")
	namespaces = corev1.SchemeGroupVersion.WithResource("namespaces")
)

// replica is one service replica's view of the namespaces: a watch cache
// over the shared etcd, as the server serves them.
type replica struct {
	store storage.Interface
}

// startReplicas starts n watch caches of namespaces over one etcd.
func startReplicas(t *testing.T, n int) []replica {
	t.Helper()
	client := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond)).Client(t)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codec, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("Namespace"), "NamespaceList")
	if err != nil {
		t.Fatal(err)
	}
	var out []replica
	for range n {
		c, err := cacher.New(etcd3.New(client, codec, codec.New), codec.New, nsKeys.Prefix())
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Run(ctx)
		}()
		t.Cleanup(func() {
			stop()
			<-done
		})
		out = append(out, replica{store: c})
	}
	return out
}

func (r replica) put(t *testing.T, name string, phase corev1.NamespacePhase) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
	if phase == corev1.NamespaceTerminating {
		now := metav1.Now()
		ns.DeletionTimestamp = &now
	}
	if _, err := r.store.Create(context.Background(), nsKeys.Object("", name), ns); err != nil {
		t.Fatal(err)
	}
}

// waitCached polls until r's cache shows namespace name in phase.
func (r replica) waitCached(t *testing.T, name string, phase corev1.NamespacePhase) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		obj, err := r.store.Get(context.Background(), nsKeys.Object("", name), storage.GetOptions{ResourceVersion: "0"})
		if err == nil && obj.(*corev1.Namespace).Status.Phase == phase {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache never showed %s %s: %v", name, phase, err)
		}
		<-tick.C
	}
}

func (r replica) remove(t *testing.T, name string) {
	t.Helper()
	if _, err := r.store.Delete(context.Background(), nsKeys.Object("", name), nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestLifecycle(t *testing.T) {
	r := startReplicas(t, 1)[0]
	r.put(t, "active", corev1.NamespaceActive)
	r.put(t, "ending", corev1.NamespaceTerminating)
	l := nslifecycle.New(r.store, nsKeys, nslifecycle.Immortal...)
	cm := func(name, generateName string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: generateName}}
	}
	nsKind := corev1.SchemeGroupVersion.WithKind("Namespace")
	cmKind := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	cases := []struct {
		name    string
		attrs   rest.Attributes
		code    int32
		message string
		// detailsKind and cause are checked when set.
		detailsKind, cause string
	}{
		{name: "create in an active namespace",
			attrs: rest.Attributes{Operation: rest.Create, Resource: configMaps, Kind: cmKind, Namespace: "active", Name: "a", Object: cm("a", "")}},
		{name: "create in a missing namespace",
			attrs: rest.Attributes{Operation: rest.Create, Resource: configMaps, Kind: cmKind, Namespace: "missing", Name: "a", Object: cm("a", "")},
			code:  404, message: `namespaces "missing" not found`, detailsKind: "namespaces"},
		{name: "update in a missing namespace",
			attrs: rest.Attributes{Operation: rest.Update, Resource: configMaps, Kind: cmKind, Namespace: "missing", Name: "a", Object: cm("a", "")},
			code:  404, message: `namespaces "missing" not found`},
		{name: "create in a terminating namespace",
			attrs: rest.Attributes{Operation: rest.Create, Resource: configMaps, Kind: cmKind, Namespace: "ending", Name: "a", Object: cm("a", "")},
			code:  403, message: `configmaps "a" is forbidden: unable to create new content in namespace ending because it is being terminated`,
			detailsKind: "configmaps", cause: string(corev1.NamespaceTerminatingCause)},
		{name: "create with generateName in a terminating namespace",
			attrs: rest.Attributes{Operation: rest.Create, Resource: configMaps, Kind: cmKind, Namespace: "ending", Object: cm("", "gen-")},
			code:  403, message: `configmaps "gen-" is forbidden: unable to create new content in namespace ending because it is being terminated`},
		{name: "update in a terminating namespace",
			attrs: rest.Attributes{Operation: rest.Update, Resource: configMaps, Kind: cmKind, Namespace: "ending", Name: "a", Object: cm("a", "")}},
		{name: "delete in a missing namespace",
			attrs: rest.Attributes{Operation: rest.Delete, Resource: configMaps, Kind: cmKind, Namespace: "missing", Name: "a"}},
		{name: "create a namespace",
			attrs: rest.Attributes{Operation: rest.Create, Resource: namespaces, Kind: nsKind, Name: "new", Object: &corev1.Namespace{}}},
		{name: "delete default",
			attrs: rest.Attributes{Operation: rest.Delete, Resource: namespaces, Kind: nsKind, Name: "default"},
			code:  403, message: `namespaces "default" is forbidden: this namespace may not be deleted`},
		{name: "delete kube-system",
			attrs: rest.Attributes{Operation: rest.Delete, Resource: namespaces, Kind: nsKind, Name: "kube-system"},
			code:  403, message: `namespaces "kube-system" is forbidden: this namespace may not be deleted`},
		{name: "delete kube-public",
			attrs: rest.Attributes{Operation: rest.Delete, Resource: namespaces, Kind: nsKind, Name: "kube-public"},
			code:  403, message: `namespaces "kube-public" is forbidden: this namespace may not be deleted`},
		{name: "delete another namespace",
			attrs: rest.Attributes{Operation: rest.Delete, Resource: namespaces, Kind: nsKind, Name: "active"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := l.Admit(context.Background(), &tc.attrs)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			status, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("got %v, want a %d status", err, tc.code)
			}
			s := status.Status()
			if s.Code != tc.code || s.Message != tc.message {
				t.Fatalf("got %d %q, want %d %q", s.Code, s.Message, tc.code, tc.message)
			}
			if tc.detailsKind != "" && (s.Details == nil || s.Details.Kind != tc.detailsKind) {
				t.Fatalf("details %+v, want kind %s", s.Details, tc.detailsKind)
			}
			if tc.cause != "" && !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				t.Fatalf("causes %+v, want %s", s.Details, tc.cause)
			}
		})
	}
}

func TestLifecycleAcrossReplicas(t *testing.T) {
	rs := startReplicas(t, 2)
	a, b := rs[0], rs[1]
	onB := nslifecycle.New(b.store, nsKeys)
	create := func(ns string) error {
		return onB.Admit(context.Background(), &rest.Attributes{
			Operation: rest.Create, Resource: configMaps, Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
			Namespace: ns, Name: "x", Object: &corev1.ConfigMap{},
		})
	}
	for i := range 20 {
		// Each round, replica A makes a namespace and at once replica B
		// admits content into it, whatever its cache has seen.
		name := "n" + string(rune('a'+i))
		a.put(t, name, corev1.NamespaceActive)
		if err := create(name); err != nil {
			t.Fatalf("a namespace created on another replica: %v", err)
		}
		// Deleted while terminating and created again: B must not
		// refuse on a cached Terminating.
		a.remove(t, name)
		a.put(t, name, corev1.NamespaceTerminating)
		b.waitCached(t, name, corev1.NamespaceTerminating)
		a.remove(t, name)
		a.put(t, name, corev1.NamespaceActive)
		if err := create(name); err != nil {
			t.Fatalf("a namespace recreated on another replica: %v", err)
		}
	}
}

// staleCache answers reads at any revision from a copy taken earlier,
// as a lagging watch cache does, and consistent reads from the store.
type staleCache struct {
	storage.Getter
	stale runtime.Object
}

func (s staleCache) Get(ctx context.Context, key string, opts storage.GetOptions) (runtime.Object, error) {
	if opts.ResourceVersion == "0" {
		return s.stale.DeepCopyObject(), nil
	}
	return s.Getter.Get(ctx, key, opts)
}

// A namespace deleted through this replica is looked up live for a
// while, so content created right after the delete is refused even when
// the cache still shows the namespace active.
func TestLifecycleLooksUpRecentlyDeletedNamespacesLive(t *testing.T) {
	r := startReplicas(t, 1)[0]
	r.put(t, "doomed", corev1.NamespaceTerminating)
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	l := nslifecycle.New(staleCache{Getter: r.store, stale: active}, nsKeys, nslifecycle.Immortal...)
	create := &rest.Attributes{Operation: rest.Create, Resource: configMaps, Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: "doomed", Name: "late",
		Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}}
	if err := l.Admit(context.Background(), create); err != nil {
		t.Fatalf("before the delete went through this replica, the cache's view admits: %v", err)
	}
	del := &rest.Attributes{Operation: rest.Delete, Resource: namespaces, Kind: corev1.SchemeGroupVersion.WithKind("Namespace"), Name: "doomed"}
	if err := l.Admit(context.Background(), del); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	if err := l.Admit(context.Background(), create); !apierrors.IsForbidden(err) {
		t.Fatalf("create right after the delete: err = %v, want Forbidden", err)
	}
}
