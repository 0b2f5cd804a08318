package storage

import (
	"fmt"
	"strings"
)

// coreGroupSegment stands for the legacy core group ("") in keys, so that
// every key has the same number of segments.
const coreGroupSegment = "core"

// Keys builds the etcd keys of one resource:
// <prefix>/registry/<group>/<resource>/[<namespace>/]<name>.
type Keys struct {
	root string
}

// NewKeys returns the key builder for group/resource below prefix, which
// may be empty ("/registry/..." then starts the key).
func NewKeys(prefix, group, resource string) Keys {
	if group == "" {
		group = coreGroupSegment
	}
	return Keys{root: strings.TrimSuffix(prefix, "/") + "/registry/" + group + "/" + resource + "/"}
}

// Prefix is the prefix of every object of the resource, ending in "/".
func (k Keys) Prefix() string { return k.root }

// NamespacePrefix is the prefix of the objects in namespace, ending in "/".
// For cluster-scoped resources use Prefix.
func (k Keys) NamespacePrefix(namespace string) string { return k.root + namespace + "/" }

// Object is the key of one object; namespace is empty for cluster-scoped
// resources.
func (k Keys) Object(namespace, name string) string {
	if namespace == "" {
		return k.root + name
	}
	return k.root + namespace + "/" + name
}

// ValidatePrefix rejects a list or watch prefix that does not end in "/":
// without it, namespace "ns1" would also match "ns10".
func ValidatePrefix(prefix string) error {
	if !strings.HasSuffix(prefix, "/") {
		return NewError(ErrCodeInvalidRequest, prefix, 0, fmt.Sprintf("prefix %q must end in /", prefix))
	}
	return nil
}
