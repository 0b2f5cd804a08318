package changefeed

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	proto "kplane.dev/proto/changefeed"
)

// keyParts is what an etcd key of a stored object says:
// <prefix>/registry/<group>/<resource>/[<namespace>/]<name>.
type keyParts struct {
	group, resource, namespace, name string
}

// parseKey splits key below registry (which ends in "/"); ok is false for
// keys of any other shape.
func parseKey(registry, key string) (keyParts, bool) {
	rest, found := strings.CutPrefix(key, registry)
	if !found {
		return keyParts{}, false
	}
	segs := strings.Split(rest, "/")
	var k keyParts
	switch len(segs) {
	case 3:
		k = keyParts{group: segs[0], resource: segs[1], name: segs[2]}
	case 4:
		k = keyParts{group: segs[0], resource: segs[1], namespace: segs[2], name: segs[3]}
	default:
		return keyParts{}, false
	}
	for _, s := range segs {
		if s == "" {
			return keyParts{}, false
		}
	}
	if k.group == proto.CoreGroup {
		k.group = ""
	}
	return k, true
}

// servedObject is a stored object as served: its bytes with
// metadata.resourceVersion set to rev and the fields named by drop left
// out, and the version and kind its apiVersion and kind name.
func servedObject(stored []byte, rev int64, drop []string) (obj []byte, version, kind string, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stored, &top); err != nil {
		return nil, "", "", fmt.Errorf("decode stored object: %w", err)
	}
	for _, f := range drop {
		delete(top, f)
	}
	var apiVersion string
	if raw, ok := top["apiVersion"]; ok {
		if err := json.Unmarshal(raw, &apiVersion); err != nil {
			return nil, "", "", fmt.Errorf("decode apiVersion: %w", err)
		}
	}
	if raw, ok := top["kind"]; ok {
		if err := json.Unmarshal(raw, &kind); err != nil {
			return nil, "", "", fmt.Errorf("decode kind: %w", err)
		}
	}
	metadata := map[string]json.RawMessage{}
	if raw, ok := top["metadata"]; ok {
		if err := json.Unmarshal(raw, &metadata); err != nil {
			return nil, "", "", fmt.Errorf("decode metadata: %w", err)
		}
	}
	metadata["resourceVersion"] = strconv.AppendQuote(nil, strconv.FormatInt(rev, 10))
	if top["metadata"], err = json.Marshal(metadata); err != nil {
		return nil, "", "", fmt.Errorf("encode metadata: %w", err)
	}
	if obj, err = json.Marshal(top); err != nil {
		return nil, "", "", fmt.Errorf("encode object: %w", err)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, "", "", fmt.Errorf("parse apiVersion %q: %w", apiVersion, err)
	}
	return obj, gv.Version, kind, nil
}

// message is one message ready to publish.
type message struct {
	subject string
	id      string
	rev     int64
	event   proto.Event
}

// change builds the message of one stored object: stored is its last
// state (nil if etcd no longer has it, for a deletion), rev the
// resourceVersion it is served with. ok is false for a key the publisher
// does not publish.
func (p *Publisher) change(typ proto.EventType, key string, stored []byte, rev int64) (message, bool, error) {
	k, ok := parseKey(p.registry, key)
	if !ok {
		return message{}, false, nil
	}
	e := proto.Event{Type: typ, ResourceVersion: strconv.FormatInt(rev, 10), Group: k.group, Resource: k.resource, Namespace: k.namespace, Name: k.name}
	byStored := p.o.kinds == nil
	if !byStored {
		gvk, ok := p.o.kinds[schema.GroupResource{Group: k.group, Resource: k.resource}]
		switch {
		case ok:
			e.Version, e.Kind = gvk.Version, gvk.Kind
		case p.o.others:
			byStored = true
		default:
			return message{}, false, nil
		}
	}
	if stored != nil {
		var drop []string
		if k.group == "" && k.resource == "secrets" && !p.o.secretData {
			drop = []string{"data", "stringData"} // a Secret's contents
		}
		obj, version, kind, err := servedObject(stored, rev, drop)
		if err != nil {
			return message{}, false, fmt.Errorf("key %q at revision %d: %w", key, rev, err)
		}
		e.Object = obj
		if byStored {
			e.Version, e.Kind = version, kind
		}
	}
	if e.Version == "" {
		return message{}, false, fmt.Errorf("key %q at revision %d: no version to publish it under (its last state is gone; WithKinds names it)", key, rev)
	}
	return message{subject: p.subject(k.group, e.Version, k.resource), event: e}, true, nil
}

func (p *Publisher) subject(group, version, resource string) string {
	return p.o.subjectRoot + "." + proto.SubjectGroup(group) + "." + version + "." + resource
}
