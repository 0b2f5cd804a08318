package serviceresolver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Resolver finds the URL of a service. Its method is that of
// k8s.io/apiserver's webhook.ServiceResolver, so that webhook clients
// take a Resolver as it is.
type Resolver interface {
	ResolveEndpoint(namespace, name string, port int32) (*url.URL, error)
}

// ErrNotMapped is what a Map answers for a service it does not list.
var ErrNotMapped = errors.New("not in the service map")

// DNS resolves a service to its cluster DNS name,
// https://<name>.<namespace>.svc:<port>.
type DNS struct{}

var _ Resolver = DNS{}

// ResolveEndpoint returns the service's cluster DNS URL.
func (DNS) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(name+"."+namespace+".svc", strconv.Itoa(int(port)))}, nil
}

// Map resolves the services it lists, keyed by "namespace/name", and no
// others. The port of the listed URL wins over the one asked for: the
// map says where the service really listens.
type Map map[string]*url.URL

var _ Resolver = Map(nil)

// ResolveEndpoint returns the listed URL of namespace/name, or an error
// wrapping ErrNotMapped.
func (m Map) ResolveEndpoint(namespace, name string, _ int32) (*url.URL, error) {
	u, ok := m[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("service %s/%s: %w", namespace, name, ErrNotMapped)
	}
	c := *u
	return &c, nil
}

// Or resolves the services m lists through m and the others through
// next.
func (m Map) Or(next Resolver) Resolver { return fallback{m: m, next: next} }

type fallback struct {
	m    Map
	next Resolver
}

func (f fallback) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if _, ok := f.m[namespace+"/"+name]; ok {
		return f.m.ResolveEndpoint(namespace, name, port)
	}
	return f.next.ResolveEndpoint(namespace, name, port)
}

// ParseMap reads a service map, "namespace/name=https://host:port"
// entries as a repeated or comma-separated flag gives them.
func ParseMap(entries []string) (Map, error) {
	m := Map{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		key, raw, ok := strings.Cut(e, "=")
		ns, name, okKey := strings.Cut(key, "/")
		if !ok || !okKey || ns == "" || name == "" {
			return nil, fmt.Errorf("service map entry %q: want namespace/name=https://host:port", e)
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("service map entry %q: %q is not an https URL", e, raw)
		}
		m[key] = u
	}
	return m, nil
}
