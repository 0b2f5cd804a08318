package routing

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Resolver finds the URL of the service an APIService names.
type Resolver interface {
	Resolve(namespace, name string, port int32) (*url.URL, error)
}

// DNSResolver resolves a service to its cluster DNS name,
// https://<name>.<namespace>.svc:<port>.
type DNSResolver struct{}

var _ Resolver = DNSResolver{}

// Resolve returns the service's cluster DNS URL.
func (DNSResolver) Resolve(namespace, name string, port int32) (*url.URL, error) {
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(name+"."+namespace+".svc", strconv.Itoa(int(port)))}, nil
}

// StaticResolver resolves the services it lists, keyed by
// "namespace/name", and no others. The port of the listed URL wins over
// the APIService's: the map says where the service really listens.
type StaticResolver map[string]*url.URL

var _ Resolver = StaticResolver(nil)

// Resolve returns the listed URL of namespace/name.
func (s StaticResolver) Resolve(namespace, name string, _ int32) (*url.URL, error) {
	u, ok := s[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("service %s/%s is not in the service map", namespace, name)
	}
	c := *u
	return &c, nil
}

// ParseServiceMap reads a service map, "namespace/name=https://host:port"
// entries separated by commas.
func ParseServiceMap(entries []string) (StaticResolver, error) {
	m := StaticResolver{}
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
