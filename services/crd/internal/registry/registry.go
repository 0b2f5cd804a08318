package registry

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/services/crd/internal/customresource"
)

// Replacer is the API server whose resources the registry sets.
type Replacer interface {
	Replace(resources []*resource.Resource) error
}

// entry is one CRD's declarations, rebuilt only when the CRD changes in
// a way that changes them.
type entry struct {
	uid         types.UID
	generation  int64
	names       apiextensionsv1.CustomResourceDefinitionNames
	served      bool
	terminating bool
	// established lists the resources in their group-versions' resource
	// lists; until then only the aggregated discovery lists them.
	established bool
	resources   []*resource.Resource
}

// Registry declares the custom resources of the CRDs to an API server.
type Registry struct {
	static     []*resource.Resource
	converters customresource.Converters
	clock      clock.PassiveClock
	log        *slog.Logger

	// mu guards entries and terminating; sync holds it while it
	// replaces the server's resources, so replacements are in order.
	mu          sync.Mutex
	entries     map[string]*entry
	terminating map[schema.GroupResource]bool
	// changed wakes the loop that replaces the resources.
	changed chan struct{}
	// caughtUp is what Missing needs of the running registry; nil until
	// Run starts.
	caughtUp atomic.Pointer[follower]
}

// follower is the running registry's view of the CRDs.
type follower struct {
	api      Replacer
	informer apiextensionsinformers.CustomResourceDefinitionInformer
	// get reads one CRD from storage, consistently.
	get func(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error)
}

// missingWait bounds how long a request for a resource this replica does
// not serve waits for its watch of the CRDs to catch up with storage.
const missingWait = time.Second

// New returns a registry that declares the custom resources, and static
// (crd's own resources).
func New(static []*resource.Resource, converters customresource.Converters, log *slog.Logger) *Registry {
	return &Registry{
		static:      static,
		converters:  converters,
		clock:       clock.RealClock{},
		log:         log,
		entries:     map[string]*entry{},
		terminating: map[schema.GroupResource]bool{},
		changed:     make(chan struct{}, 1),
	}
}

// Run declares the custom resources of the CRDs of informer to api until
// ctx ends. synced is called after the first declaration; get reads a
// CRD from storage for Missing.
func (r *Registry) Run(ctx context.Context, api Replacer, informer apiextensionsinformers.CustomResourceDefinitionInformer, get func(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error), synced func()) error {
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.poke() },
		UpdateFunc: func(any, any) { r.poke() },
		DeleteFunc: func(any) { r.poke() },
	}); err != nil {
		return fmt.Errorf("follow CRDs: %w", err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return nil
	}
	r.caughtUp.Store(&follower{api: api, informer: informer, get: get})
	defer r.caughtUp.Store(nil)
	r.poke()
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.changed:
		}
		crds, err := informer.Lister().List(labels.Everything())
		if err != nil {
			return fmt.Errorf("list CRDs: %w", err)
		}
		if err := r.Sync(api, crds); err != nil {
			r.log.Error("serve custom resources", "err", err)
		}
		if first {
			first = false
			synced()
		}
	}
}

func (r *Registry) poke() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Sync makes api serve exactly the static resources and the custom
// resources of crds.
func (r *Registry) Sync(api Replacer, crds []*apiextensionsv1.CustomResourceDefinition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]*entry, len(crds))
	var errs []error
	for _, crd := range crds {
		e, err := r.entry(crd)
		if err != nil {
			// A CRD that cannot be served as it is now stays served as
			// it was.
			errs = append(errs, err)
			if prev, ok := r.entries[crd.Name]; ok {
				next[crd.Name] = prev
			}
			continue
		}
		next[crd.Name] = e
	}
	names := make([]string, 0, len(next))
	for n := range next {
		names = append(names, n)
	}
	slices.Sort(names)
	resources := append([]*resource.Resource(nil), r.static...)
	terminating := map[schema.GroupResource]bool{}
	for _, n := range names {
		e := next[n]
		if !e.served {
			continue
		}
		resources = append(resources, e.resources...)
		for _, res := range e.resources {
			if e.terminating {
				terminating[res.GroupResource()] = true
			}
		}
	}
	if err := api.Replace(resources); err != nil {
		return fmt.Errorf("replace served resources: %w", err)
	}
	r.entries, r.terminating = next, terminating
	if len(errs) > 0 {
		return fmt.Errorf("declare custom resources: %v", errs)
	}
	return nil
}

// entry returns crd's declarations, reusing the last ones when nothing
// they depend on changed. Callers hold r.mu.
func (r *Registry) entry(crd *apiextensionsv1.CustomResourceDefinition) (*entry, error) {
	established := apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established)
	served := established || apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted)
	terminating := apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating)
	// An entry made while the CRD was not served has no resources to
	// reuse.
	if prev, ok := r.entries[crd.Name]; ok && prev.uid == crd.UID && prev.generation == crd.Generation && namesEqual(prev.names, crd.Status.AcceptedNames) &&
		(prev.served || !served) {
		if prev.served == served && prev.terminating == terminating && prev.established == established {
			return prev, nil
		}
		e := *prev
		e.served, e.terminating, e.established = served, terminating, established
		if prev.established != established {
			e.resources = listed(prev.resources, established)
		}
		return &e, nil
	}
	e := &entry{uid: crd.UID, generation: crd.Generation, names: crd.Status.AcceptedNames, served: served, terminating: terminating, established: established}
	if !served {
		return e, nil
	}
	res, err := customresource.Resources(crd, r.converters, r.clock)
	if err != nil {
		return nil, err
	}
	e.resources = listed(res, established)
	return e, nil
}

// listed returns copies of res that discovery lists in their
// group-versions' resource lists when established, as kube lists a CRD's
// resources only once it is established: clients waiting for a new CRD
// (kube's e2e fixtures among them) poll /apis/<group>/<version> and then
// write the CRD, which must not race crd's own write of Established.
func listed(res []*resource.Resource, established bool) []*resource.Resource {
	out := make([]*resource.Resource, len(res))
	for i, r := range res {
		c := *r
		c.Unlisted = !established
		out[i] = &c
	}
	return out
}

func namesEqual(a, b apiextensionsv1.CustomResourceDefinitionNames) bool {
	return a.Plural == b.Plural && a.Singular == b.Singular && a.Kind == b.Kind && a.ListKind == b.ListKind &&
		slices.Equal(a.ShortNames, b.ShortNames) && slices.Equal(a.Categories, b.Categories)
}

// Missing brings this replica up to date when a request names a custom
// resource it does not serve: a CRD established through another replica
// moments ago may not have reached this one's watch yet. It reads the
// CRD the resource would belong to from storage and, when that CRD
// serves the version, waits (up to a second) for the watch to catch up
// and declares its resources at once. It reports whether it declared
// anything.
func (r *Registry) Missing(ctx context.Context, gvr schema.GroupVersionResource) bool {
	f := r.caughtUp.Load()
	if f == nil || gvr.Group == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, missingWait)
	defer cancel()
	name := gvr.Resource + "." + gvr.Group
	crd, err := f.get(ctx, name)
	if err != nil || !apihelpers.HasServedCRDVersion(crd, gvr.Version) || crd.Status.AcceptedNames.Plural != gvr.Resource ||
		!(apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) || apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted)) {
		return false
	}
	want, err := strconv.ParseInt(crd.ResourceVersion, 10, 64)
	if err != nil {
		return false
	}
	for {
		if cached, err := f.informer.Lister().Get(name); err == nil {
			if have, err := strconv.ParseInt(cached.ResourceVersion, 10, 64); err == nil && have >= want {
				break
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	crds, err := f.informer.Lister().List(labels.Everything())
	if err != nil {
		return false
	}
	if err := r.Sync(f.api, crds); err != nil {
		r.log.Error("serve custom resources", "err", err)
	}
	return true
}

// Terminating is the admission that refuses creates of the custom
// resources of a CRD being deleted, with kube's 405.
func (r *Registry) Terminating() rest.ValidatingAdmission { return terminatingAdmission{r} }

type terminatingAdmission struct{ r *Registry }

func (t terminatingAdmission) Handles(op rest.Operation) bool { return op == rest.Create }

func (t terminatingAdmission) Validate(_ context.Context, a *rest.Attributes) error {
	if a.Subresource != "" {
		return nil
	}
	t.r.mu.Lock()
	terminating := t.r.terminating[a.Resource.GroupResource()]
	t.r.mu.Unlock()
	if !terminating {
		return nil
	}
	err := apierrors.NewMethodNotSupported(a.Resource.GroupResource(), "create")
	err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
	return err
}
