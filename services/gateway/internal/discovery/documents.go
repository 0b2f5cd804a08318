package discovery

import (
	"encoding/json"
	"fmt"
	"sort"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	libdiscovery "kplane.dev/libs/apiserver/discovery"
)

// entry is one served group-version: its route and the backend's
// documents of it.
type entry struct {
	route      Route
	aggregated apidiscoveryv2.APIVersionDiscovery
	legacy     []byte
}

// documents are the merged documents, encoded; never modified once built.
type documents struct {
	coreVersions []string
	groupList    []byte
	// groups is /apis/<group> by group name.
	groups map[string][]byte
	// resourceLists are the backends' documents by path.
	resourceLists map[string][]byte
	core, apis    libdiscovery.Aggregated
}

// byVersionPriority orders the versions of one group as kube does: higher
// versionPriority first, then kube's version order (v2, v1, v1beta1).
func byVersionPriority(a, b Route) bool {
	if a.VersionPriority != b.VersionPriority {
		return a.VersionPriority > b.VersionPriority
	}
	return version.CompareKubeAwareVersionStrings(a.GroupVersion.Version, b.GroupVersion.Version) > 0
}

func build(entries []entry) (*documents, error) {
	d := &documents{groups: map[string][]byte{}, resourceLists: map[string][]byte{}}
	for _, e := range entries {
		d.resourceLists[e.route.legacyPath()] = e.legacy
	}

	var core []entry
	named := map[string][]entry{}
	for _, e := range entries {
		if e.route.GroupVersion.Group == "" {
			core = append(core, e)
			continue
		}
		named[e.route.GroupVersion.Group] = append(named[e.route.GroupVersion.Group], e)
	}
	sortVersions(core)
	for _, es := range named {
		sortVersions(es)
	}
	d.coreVersions = []string{}
	for _, e := range core {
		d.coreVersions = append(d.coreVersions, e.route.GroupVersion.Version)
	}

	var err error
	if d.core, err = libdiscovery.NewAggregated(aggregatedGroups(map[string][]entry{"": core}, []string{""})); err != nil {
		return nil, fmt.Errorf("encode aggregated discovery of /api: %w", err)
	}
	if d.apis, err = libdiscovery.NewAggregated(aggregatedGroups(named, aggregatedOrder(named))); err != nil {
		return nil, fmt.Errorf("encode aggregated discovery of /apis: %w", err)
	}

	list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, name := range legacyOrder(named) {
		g := apiGroup(name, named[name])
		list.Groups = append(list.Groups, g)
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		if d.groups[name], err = json.Marshal(g); err != nil {
			return nil, fmt.Errorf("encode group %s: %w", name, err)
		}
	}
	if d.groupList, err = json.Marshal(list); err != nil {
		return nil, fmt.Errorf("encode group list: %w", err)
	}
	return d, nil
}

func sortVersions(es []entry) {
	sort.SliceStable(es, func(i, j int) bool { return byVersionPriority(es[i].route, es[j].route) })
}

// aggregatedOrder orders groups as kube's aggregated discovery does: by
// the highest groupPriorityMinimum of their versions, then by name.
func aggregatedOrder(groups map[string][]entry) []string {
	priority := map[string]int32{}
	var names []string
	for name, es := range groups {
		names = append(names, name)
		for i, e := range es {
			if i == 0 || e.route.GroupPriorityMinimum > priority[name] {
				priority[name] = e.route.GroupPriorityMinimum
			}
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if priority[names[i]] != priority[names[j]] {
			return priority[names[i]] > priority[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}

// legacyOrder orders groups as kube-aggregator's /apis does: APIServices
// sorted by groupPriorityMinimum, then by name, and each group placed
// where its first APIService falls.
func legacyOrder(groups map[string][]entry) []string {
	var routes []Route
	for _, es := range groups {
		for _, e := range es {
			routes = append(routes, e.route)
		}
	}
	sort.Slice(routes, func(i, j int) bool {
		if routes[i].GroupPriorityMinimum != routes[j].GroupPriorityMinimum {
			return routes[i].GroupPriorityMinimum > routes[j].GroupPriorityMinimum
		}
		return routes[i].apiServiceName() < routes[j].apiServiceName()
	})
	var names []string
	seen := map[string]bool{}
	for _, r := range routes {
		if !seen[r.GroupVersion.Group] {
			seen[r.GroupVersion.Group] = true
			names = append(names, r.GroupVersion.Group)
		}
	}
	return names
}

func aggregatedGroups(groups map[string][]entry, order []string) []apidiscoveryv2.APIGroupDiscovery {
	var out []apidiscoveryv2.APIGroupDiscovery
	for _, name := range order {
		es := groups[name]
		if len(es) == 0 {
			continue
		}
		g := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, e := range es {
			v := e.aggregated
			v.Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent
			g.Versions = append(g.Versions, v)
		}
		out = append(out, g)
	}
	return out
}

// apiGroup is a group's legacy document; es are in version order, the
// first preferred.
func apiGroup(name string, es []entry) metav1.APIGroup {
	g := metav1.APIGroup{Name: name}
	for _, e := range es {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{
			GroupVersion: e.route.GroupVersion.String(),
			Version:      e.route.GroupVersion.Version,
		})
	}
	g.PreferredVersion = g.Versions[0]
	return g
}
