package discovery

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"kplane.dev/libs/apiserver/resource"
)

// subresource is one served subresource and its verbs; kind, when set,
// is the kind it takes instead of the resource's (an action's).
type subresource struct {
	name  string
	verbs []string
	kind  *schema.GroupVersionKind
}

// scaleKind is what /scale takes and returns, for every resource.
var scaleKind = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}

// subresources lists what r serves besides itself, in kube's order
// (by name, then /scale): /finalize takes only update, /status get, patch
// and update, /scale the same of autoscaling/v1 Scale.
func subresources(r *resource.Resource) []subresource {
	var subs []subresource
	if r.Subresources.Finalize {
		subs = append(subs, subresource{name: "finalize", verbs: []string{"update"}})
	}
	if r.Subresources.Status {
		subs = append(subs, subresource{name: "status", verbs: []string{"get", "patch", "update"}})
	}
	for _, a := range r.Subresources.Actions {
		subs = append(subs, subresource{name: a.Name, verbs: []string{"create"}, kind: &a.Kind})
	}
	sort.SliceStable(subs, func(i, j int) bool { return subs[i].name < subs[j].name })
	if r.Subresources.Scale != nil {
		// Only custom-resource-like kinds have it, and kube's discovery
		// of a custom resource lists it last, after /status.
		subs = append(subs, subresource{name: "scale", verbs: []string{"get", "patch", "update"}, kind: &scaleKind})
	}
	return subs
}

// documents holds every discovery document of one set of resources,
// encoded. It is never modified once built.
type documents struct {
	// coreVersions are the versions of the legacy core group, for /api.
	coreVersions []string
	// groupList is /apis.
	groupList []byte
	// groups is /apis/<group>, by group name.
	groups map[string][]byte
	// resourceLists is /api/<version> (key "<version>") and
	// /apis/<group>/<version> (key "<group>/<version>").
	resourceLists map[string][]byte
	// core and apis are the aggregated documents of /api and /apis.
	core, apis aggregatedDocument
}

// aggregatedDocument is one APIGroupDiscoveryList in the versions clients
// may ask for, and its ETag.
type aggregatedDocument struct {
	v2, v2beta1 []byte
	etag        string
}

// groupVersions is one group and its versions, most preferred first, each
// with its resources sorted by name.
type groupVersions struct {
	name     string
	versions []versionResources
}

type versionResources struct {
	version   string
	resources []*resource.Resource
}

func build(resources []*resource.Resource) (*documents, error) {
	groups := group(resources)
	d := &documents{
		groups:        map[string][]byte{},
		resourceLists: map[string][]byte{},
	}

	list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	var (
		core, apis                 []apidiscoveryv2.APIGroupDiscovery
		unlistedCore, unlistedApis []string
	)
	for _, g := range groups {
		agg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, v := range g.versions {
			gv := metav1.GroupVersion{Group: g.name, Version: v.version}.String()
			rl := resourceList(gv, v.resources)
			key := gv
			if g.name == "" {
				// kube leaves apiVersion out of the legacy group's list.
				rl.APIVersion = ""
			}
			b, err := json.Marshal(rl)
			if err != nil {
				return nil, fmt.Errorf("encode resource list of %s: %w", gv, err)
			}
			d.resourceLists[key] = b
			agg.Versions = append(agg.Versions, versionDiscovery(v))
			for _, r := range v.resources {
				if !r.Unlisted {
					continue
				}
				if g.name == "" {
					unlistedCore = append(unlistedCore, r.GroupVersionResource.String())
				} else {
					unlistedApis = append(unlistedApis, r.GroupVersionResource.String())
				}
			}
		}
		if g.name == "" {
			for _, v := range g.versions {
				d.coreVersions = append(d.coreVersions, v.version)
			}
			core = append(core, agg)
			continue
		}
		apis = append(apis, agg)

		ag := apiGroup(g)
		list.Groups = append(list.Groups, ag)
		ag.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		b, err := json.Marshal(ag)
		if err != nil {
			return nil, fmt.Errorf("encode group %s: %w", g.name, err)
		}
		d.groups[g.name] = b
	}

	var err error
	if d.groupList, err = json.Marshal(list); err != nil {
		return nil, fmt.Errorf("encode group list: %w", err)
	}
	if d.core, err = aggregate(core, unlistedCore); err != nil {
		return nil, err
	}
	if d.apis, err = aggregate(apis, unlistedApis); err != nil {
		return nil, err
	}
	return d, nil
}

// group sorts resources into groups and versions. Groups keep the order in
// which they are first declared, which is how a service states their
// priority; versions are ordered as kube orders versions of equal priority
// (v2 before v1 before v1beta1), the first being the preferred version.
func group(resources []*resource.Resource) []groupVersions {
	var groups []groupVersions
	index := map[string]int{}
	for _, r := range resources {
		gvr := r.GroupVersionResource
		i, ok := index[gvr.Group]
		if !ok {
			i = len(groups)
			index[gvr.Group] = i
			groups = append(groups, groupVersions{name: gvr.Group})
		}
		g := &groups[i]
		j := -1
		for k := range g.versions {
			if g.versions[k].version == gvr.Version {
				j = k
			}
		}
		if j < 0 {
			j = len(g.versions)
			g.versions = append(g.versions, versionResources{version: gvr.Version})
		}
		g.versions[j].resources = append(g.versions[j].resources, r)
	}
	for _, g := range groups {
		sort.SliceStable(g.versions, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(g.versions[i].version, g.versions[j].version) > 0
		})
		for _, v := range g.versions {
			sort.SliceStable(v.resources, func(i, j int) bool {
				return v.resources[i].GroupVersionResource.Resource < v.resources[j].GroupVersionResource.Resource
			})
		}
	}
	return groups
}

func apiGroup(g groupVersions) metav1.APIGroup {
	ag := metav1.APIGroup{Name: g.name}
	for _, v := range g.versions {
		ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{
			GroupVersion: metav1.GroupVersion{Group: g.name, Version: v.version}.String(),
			Version:      v.version,
		})
	}
	ag.PreferredVersion = ag.Versions[0]
	return ag
}

func resourceList(gv string, resources []*resource.Resource) metav1.APIResourceList {
	rl := metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv,
		APIResources: []metav1.APIResource{},
	}
	for _, r := range resources {
		if r.Unlisted {
			continue
		}
		gvr := r.GroupVersionResource
		rl.APIResources = append(rl.APIResources, metav1.APIResource{
			Name:               gvr.Resource,
			SingularName:       r.Singular,
			Namespaced:         r.Namespaced,
			Kind:               r.Kind,
			Verbs:              r.VerbList(),
			ShortNames:         r.ShortNames,
			Categories:         r.Categories,
			StorageVersionHash: StorageVersionHash(gvr.Group, storageVersion(r), r.Kind),
		})
		for _, sub := range subresources(r) {
			ar := metav1.APIResource{
				Name:       gvr.Resource + "/" + sub.name,
				Namespaced: r.Namespaced,
				Kind:       r.Kind,
				Verbs:      sub.verbs,
			}
			if sub.kind != nil {
				// Kube names the group and version of a subresource
				// whose kind is another group's (TokenRequest).
				ar.Group, ar.Version, ar.Kind = sub.kind.Group, sub.kind.Version, sub.kind.Kind
			}
			rl.APIResources = append(rl.APIResources, ar)
		}
	}
	return rl
}

func versionDiscovery(v versionResources) apidiscoveryv2.APIVersionDiscovery {
	vd := apidiscoveryv2.APIVersionDiscovery{
		Version:   v.version,
		Resources: []apidiscoveryv2.APIResourceDiscovery{},
		Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
	}
	for _, r := range v.resources {
		gvk := r.GroupVersionKind()
		kind := &metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		rd := apidiscoveryv2.APIResourceDiscovery{
			Resource:         r.GroupVersionResource.Resource,
			ResponseKind:     kind,
			Scope:            scope,
			SingularResource: r.Singular,
			Verbs:            r.VerbList(),
			ShortNames:       r.ShortNames,
			Categories:       r.Categories,
		}
		for _, sub := range subresources(r) {
			subKind := kind
			if sub.kind != nil {
				subKind = &metav1.GroupVersionKind{Group: sub.kind.Group, Version: sub.kind.Version, Kind: sub.kind.Kind}
			}
			rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource:  sub.name,
				ResponseKind: subKind,
				Verbs:        sub.verbs,
			})
		}
		vd.Resources = append(vd.Resources, rd)
	}
	return vd
}

// aggregate encodes an aggregated document. Its ETag hashes the list as
// kube-apiserver hashes it (without type metadata), so both versions
// share it; Vary: Accept keeps caches apart. The resources it lists that
// the resource lists leave out (unlisted) are hashed too, when there are
// any: the gateway checks this ETag alone to learn that a backend's
// documents changed, and a resource becoming listed changes only the
// resource list.
func aggregate(groups []apidiscoveryv2.APIGroupDiscovery, unlisted []string) (aggregatedDocument, error) {
	if groups == nil {
		groups = []apidiscoveryv2.APIGroupDiscovery{}
	}
	list := apidiscoveryv2.APIGroupDiscoveryList{Items: groups}
	unversioned, err := json.Marshal(list)
	if err != nil {
		return aggregatedDocument{}, fmt.Errorf("encode aggregated discovery: %w", err)
	}
	var doc aggregatedDocument
	h := sha512.New()
	h.Write(unversioned)
	if len(unlisted) > 0 {
		fmt.Fprintf(h, "\nunlisted %s", strings.Join(unlisted, ","))
	}
	doc.etag = fmt.Sprintf("%X", h.Sum(nil))

	list.TypeMeta = metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: apidiscoveryv2.SchemeGroupVersion.String()}
	if doc.v2, err = json.Marshal(list); err != nil {
		return aggregatedDocument{}, fmt.Errorf("encode aggregated discovery: %w", err)
	}

	// v2beta1 has the same shape; reading the v2 document into it checks so.
	var beta apidiscoveryv2beta1.APIGroupDiscoveryList
	if err := json.Unmarshal(unversioned, &beta); err != nil {
		return aggregatedDocument{}, fmt.Errorf("convert aggregated discovery to v2beta1: %w", err)
	}
	beta.TypeMeta = metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: apidiscoveryv2beta1.SchemeGroupVersion.String()}
	if doc.v2beta1, err = json.Marshal(beta); err != nil {
		return aggregatedDocument{}, fmt.Errorf("encode aggregated discovery v2beta1: %w", err)
	}
	return doc, nil
}

// StorageVersionHash is the storageVersionHash kube-apiserver publishes for
// a resource stored as group/version/kind: clients compare it to notice
// that the storage version changed.
func StorageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// storageVersion is the version r's objects are stored in.
func storageVersion(r *resource.Resource) string {
	if r.StorageVersion != "" {
		return r.StorageVersion
	}
	return r.GroupVersionResource.Version
}
