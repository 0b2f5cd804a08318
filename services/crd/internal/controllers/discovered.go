package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	libdiscovery "kplane.dev/libs/apiserver/discovery"
)

// Discovered reports whether the API's discovery lists crd's resource
// in every version it serves.
type Discovered func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, error)

// GatewayDiscovery answers Discovered from the aggregated discovery
// document the gateway serves on /apis, which clients such as kubectl
// read to map a kind to its resource before they send it. crd lists a
// CRD there as soon as its names are accepted, and in
// /apis/<group>/<version> only once it is established, as kube does:
// that is the document kube's e2e fixtures poll before they write the
// CRD again.
func GatewayDiscovery(client rest.Interface) Discovered {
	var (
		mu      sync.Mutex
		fetched time.Time
		last    apidiscoveryv2.APIGroupDiscoveryList
	)
	return func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		// Many CRDs made at once (a chart's) are checked against one read.
		if time.Since(fetched) >= discoveryReuse {
			body, err := client.Get().AbsPath("/apis").SetHeader("Accept", libdiscovery.MediaTypeV2).Do(ctx).Raw()
			if err != nil {
				return false, fmt.Errorf("read the aggregated discovery: %w", err)
			}
			var list apidiscoveryv2.APIGroupDiscoveryList
			if err := json.Unmarshal(body, &list); err != nil {
				return false, fmt.Errorf("decode the aggregated discovery: %w", err)
			}
			last, fetched = list, time.Now()
		}
		return listed(&last, crd), nil
	}
}

// listed reports whether list has crd's resource in every version the
// CRD serves.
func listed(list *apidiscoveryv2.APIGroupDiscoveryList, crd *apiextensionsv1.CustomResourceDefinition) bool {
	var group *apidiscoveryv2.APIGroupDiscovery
	for i := range list.Items {
		if list.Items[i].Name == crd.Spec.Group {
			group = &list.Items[i]
			break
		}
	}
	if group == nil {
		return false
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		found := slices.ContainsFunc(group.Versions, func(gv apidiscoveryv2.APIVersionDiscovery) bool {
			return gv.Version == v.Name && slices.ContainsFunc(gv.Resources, func(r apidiscoveryv2.APIResourceDiscovery) bool {
				return r.Resource == crd.Status.AcceptedNames.Plural
			})
		})
		if !found {
			return false
		}
	}
	return true
}

// establishWait bounds how long a CRD whose names were accepted waits
// for discovery before it is established all the same: kube's handler of
// custom resources waits as long in a cluster of several API servers,
// for the others to serve the CRD too.
const establishWait = 5 * time.Second

// Backoff of the discovery checks of one CRD: the gateway lists a new
// group-version tens of milliseconds after its APIService is made. One
// read of the discovery answers the checks of the next discoveryReuse.
const (
	discoveredFirstRetry = 10 * time.Millisecond
	discoveredMaxRetry   = 100 * time.Millisecond
	discoveryReuse       = discoveredFirstRetry
)

// awaitDiscovery hands a CRD whose names were accepted to establish once
// clients find it in discovery, so that a client that waits for
// Established can send its custom resources at once, as on kube, where
// the server that establishes a CRD serves its discovery too. Here the
// gateway merges discovery from crd's replicas a moment later.
type awaitDiscovery struct {
	lister     apiextensionslisters.CustomResourceDefinitionLister
	discovered Discovered
	establish  func(name string)
	log        *slog.Logger
	queue      workqueue.TypedRateLimitingInterface[string]
	// since is when each waiting CRD was first checked; only run's
	// goroutine touches it.
	since map[string]time.Time
	now   func() time.Time
}

func newAwaitDiscovery(lister apiextensionslisters.CustomResourceDefinitionLister, discovered Discovered, establish func(string), log *slog.Logger) *awaitDiscovery {
	return &awaitDiscovery{
		lister:     lister,
		discovered: discovered,
		establish:  establish,
		log:        log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](discoveredFirstRetry, discoveredMaxRetry),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "crd_await_discovery"}),
		since: map[string]time.Time{},
		now:   time.Now,
	}
}

// add queues the CRD named name for a check.
func (a *awaitDiscovery) add(name string) { a.queue.Add(name) }

// run checks the queued CRDs until ctx ends.
func (a *awaitDiscovery) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	for {
		name, quit := a.queue.Get()
		if quit {
			return
		}
		a.check(ctx, name)
		a.queue.Done(name)
	}
}

func (a *awaitDiscovery) check(ctx context.Context, name string) {
	crd, err := a.lister.Get(name)
	if err != nil || !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) || apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		a.forget(name)
		return
	}
	first, ok := a.since[name]
	if !ok {
		first = a.now()
		a.since[name] = first
	}
	found, err := a.discovered(ctx, crd)
	if !found && a.now().Sub(first) < establishWait {
		a.queue.AddRateLimited(name)
		return
	}
	if !found && ctx.Err() == nil {
		// Said once, not at every check: the gateway may be down.
		a.log.Warn("establish a CRD that discovery does not list yet", "crd", name, "waited", establishWait, "err", err)
	}
	a.forget(name)
	a.establish(name)
}

func (a *awaitDiscovery) forget(name string) {
	a.queue.Forget(name)
	delete(a.since, name)
}
