package serviceresolver_test

import (
	"errors"
	"net/url"
	"testing"

	"kplane.dev/libs/serviceresolver"
)

func TestParseMap(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
		want    map[string]string
		wantErr bool
	}{
		{name: "empty", entries: nil, want: map[string]string{}},
		{name: "entries", entries: []string{"ns/a=https://127.0.0.1:8443", " ", " ns/b=https://b.example:443/base "},
			want: map[string]string{"ns/a": "https://127.0.0.1:8443", "ns/b": "https://b.example:443/base"}},
		{name: "no name", entries: []string{"ns=https://127.0.0.1:8443"}, wantErr: true},
		{name: "empty namespace", entries: []string{"/a=https://127.0.0.1:8443"}, wantErr: true},
		{name: "no URL", entries: []string{"ns/a"}, wantErr: true},
		{name: "not https", entries: []string{"ns/a=http://127.0.0.1:8080"}, wantErr: true},
		{name: "no host", entries: []string{"ns/a=https://"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := serviceresolver.ParseMap(tt.entries)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseMap(%q): error %v, want error %v", tt.entries, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			got := map[string]string{}
			for k, u := range m {
				got[k] = u.String()
			}
			if len(got) != len(tt.want) {
				t.Fatalf("ParseMap(%q) = %v, want %v", tt.entries, got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("ParseMap(%q)[%s] = %q, want %q", tt.entries, k, got[k], v)
				}
			}
		})
	}
}

func TestResolveEndpoint(t *testing.T) {
	m, err := serviceresolver.ParseMap([]string{"ns/mapped=https://127.0.0.1:8443"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		resolver serviceresolver.Resolver
		svc      string
		want     string
		// notMapped is the error wanted, when one is.
		notMapped bool
	}{
		{name: "dns", resolver: serviceresolver.DNS{}, svc: "mapped", want: "https://mapped.ns.svc:443"},
		{name: "map: listed, its port wins", resolver: m, svc: "mapped", want: "https://127.0.0.1:8443"},
		{name: "map: not listed", resolver: m, svc: "other", notMapped: true},
		{name: "map or dns: listed", resolver: m.Or(serviceresolver.DNS{}), svc: "mapped", want: "https://127.0.0.1:8443"},
		{name: "map or dns: not listed", resolver: m.Or(serviceresolver.DNS{}), svc: "other", want: "https://other.ns.svc:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := tt.resolver.ResolveEndpoint("ns", tt.svc, 443)
			if tt.notMapped {
				if !errors.Is(err, serviceresolver.ErrNotMapped) {
					t.Fatalf("ResolveEndpoint(ns, %s): %v, %v; want ErrNotMapped", tt.svc, u, err)
				}
				return
			}
			if err != nil || u.String() != tt.want {
				t.Fatalf("ResolveEndpoint(ns, %s) = %v, %v; want %s", tt.svc, u, err, tt.want)
			}
		})
	}
}

// TestResolveEndpointCopies shows a caller cannot change the map through
// what it resolved.
func TestResolveEndpointCopies(t *testing.T) {
	m := serviceresolver.Map{"ns/a": &url.URL{Scheme: "https", Host: "127.0.0.1:1"}}
	u, err := m.ResolveEndpoint("ns", "a", 443)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "changed:2"
	if m["ns/a"].Host != "127.0.0.1:1" {
		t.Errorf("the map changed with what it returned: %v", m["ns/a"])
	}
}
