package discovery

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	libdiscovery "kplane.dev/libs/apiserver/discovery"
)

func TestOrder(t *testing.T) {
	route := func(group, version string, gpm, vp int32) entry {
		return entry{
			route:      Route{GroupVersion: schema.GroupVersion{Group: group, Version: version}, GroupPriorityMinimum: gpm, VersionPriority: vp},
			aggregated: apidiscoveryv2.APIVersionDiscovery{Version: version},
			legacy:     []byte("{}"),
		}
	}
	tests := []struct {
		name       string
		entries    []entry
		aggregated []string
		legacy     []string
		versions   map[string][]string
	}{
		{
			name:       "higher group priority first, then by name",
			entries:    []entry{route("c", "v1", 1000, 15), route("b", "v1", 17000, 15), route("a", "v1", 1000, 15)},
			aggregated: []string{"b", "a", "c"},
			legacy:     []string{"b", "a", "c"},
			versions:   map[string][]string{"a": {"v1"}, "b": {"v1"}, "c": {"v1"}},
		},
		{
			// kube-aggregator's /apis breaks ties by APIService name,
			// which starts with the version; aggregated discovery by group.
			name:       "ties: legacy by APIService name, aggregated by group name",
			entries:    []entry{route("alpha", "v2", 1000, 15), route("zeta", "v1", 1000, 15)},
			aggregated: []string{"alpha", "zeta"},
			legacy:     []string{"zeta", "alpha"},
			versions:   map[string][]string{"alpha": {"v2"}, "zeta": {"v1"}},
		},
		{
			name:       "a group ranks by its highest version's group priority",
			entries:    []entry{route("a", "v1", 100, 15), route("a", "v2beta1", 20000, 9), route("b", "v1", 1000, 15)},
			aggregated: []string{"a", "b"},
			legacy:     []string{"a", "b"},
			versions:   map[string][]string{"a": {"v1", "v2beta1"}, "b": {"v1"}},
		},
		{
			name:       "versions by version priority, then kube's version order",
			entries:    []entry{route("g", "v1", 1000, 15), route("g", "v1beta1", 1000, 20), route("g", "v2", 1000, 15), route("g", "v1alpha1", 1000, 15)},
			aggregated: []string{"g"},
			legacy:     []string{"g"},
			versions:   map[string][]string{"g": {"v1beta1", "v2", "v1", "v1alpha1"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := build(tc.entries)
			if err != nil {
				t.Fatal(err)
			}
			var list metav1.APIGroupList
			if err := json.Unmarshal(d.groupList, &list); err != nil {
				t.Fatal(err)
			}
			var legacy []string
			for _, g := range list.Groups {
				legacy = append(legacy, g.Name)
				var versions []string
				for _, v := range g.Versions {
					versions = append(versions, v.Version)
				}
				if diff := cmp.Diff(tc.versions[g.Name], versions); diff != "" {
					t.Errorf("versions of %s in /apis (-want +got):\n%s", g.Name, diff)
				}
				if g.PreferredVersion.Version != versions[0] {
					t.Errorf("preferred version of %s: %s, want %s", g.Name, g.PreferredVersion.Version, versions[0])
				}
			}
			if diff := cmp.Diff(tc.legacy, legacy); diff != "" {
				t.Errorf("groups of /apis (-want +got):\n%s", diff)
			}

			var agg apidiscoveryv2.APIGroupDiscoveryList
			if err := json.Unmarshal(aggregatedV2(t, d), &agg); err != nil {
				t.Fatal(err)
			}
			var aggregated []string
			for _, g := range agg.Items {
				aggregated = append(aggregated, g.Name)
				var versions []string
				for _, v := range g.Versions {
					versions = append(versions, v.Version)
				}
				if diff := cmp.Diff(tc.versions[g.Name], versions); diff != "" {
					t.Errorf("versions of %s in aggregated /apis (-want +got):\n%s", g.Name, diff)
				}
			}
			if diff := cmp.Diff(tc.aggregated, aggregated); diff != "" {
				t.Errorf("groups of aggregated /apis (-want +got):\n%s", diff)
			}
		})
	}
}

// aggregatedV2 is the aggregated /apis document as d serves it.
func aggregatedV2(t *testing.T, d *documents) []byte {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/apis", nil)
	req.Header.Set("Accept", libdiscovery.MediaTypeV2)
	rec := httptest.NewRecorder()
	if err := d.apis.Serve(echo.New().NewContext(req, rec), nil); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("serve aggregated /apis: status %d", rec.Code)
	}
	return rec.Body.Bytes()
}
