package watchshare

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/kubeproto"
)

// codec reads the events of one encoding of watch streams.
type codec interface {
	// read returns the next event from r as the backend framed it,
	// which is what every watcher is sent, and what the hub needs of it.
	read() (frame []byte, ev header, err error)
	// added frames obj, an event's object, as an ADDED event.
	added(obj []byte) ([]byte, error)
}

// header is what the hub reads of an event: its type, and its object
// with the object's identity and resourceVersion.
type header struct {
	typ                      string
	object                   []byte
	namespace, name, version string
}

// newCodec returns the codec of a stream of mediaType read from r, or
// false for a stream the hub cannot read.
func newCodec(mediaType string, r io.Reader) (codec, bool) {
	switch mediaType {
	case "application/json":
		return &jsonCodec{r: bufio.NewReaderSize(r, 32<<10)}, true
	case kubeproto.StreamMediaType:
		return &protoCodec{r: bufio.NewReaderSize(r, 32<<10)}, true
	}
	return nil, false
}

// jsonCodec reads a stream of JSON watch events, one per line: kube's
// JSON framing writes each event compact, and JSON escapes every newline
// inside a string.
type jsonCodec struct{ r *bufio.Reader }

type jsonEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

type objectMeta struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	ResourceVersion string `json:"resourceVersion"`
}

// eventStart and objectStart frame an event as core writes it.
var (
	eventStart  = []byte(`{"type":"`)
	objectStart = []byte(`","object":`)
)

func (c *jsonCodec) read() ([]byte, header, error) {
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		if len(line) > 0 {
			return nil, header{}, unexpected(err)
		}
		return nil, header{}, err
	}
	var h header
	if typ, obj, ok := split(line); ok {
		h.typ, h.object = typ, obj
	} else {
		var ev jsonEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, header{}, fmt.Errorf("decode watch event: %w", err)
		}
		h.typ, h.object = ev.Type, ev.Object
	}
	m, err := metadata(h.object)
	if err != nil {
		return nil, header{}, fmt.Errorf("decode %s event's object: %w", h.typ, err)
	}
	h.namespace, h.name, h.version = m.Namespace, m.Name, m.ResourceVersion
	return line, h, nil
}

// split takes an event apart as core frames it, {"type":"T","object":O}
// and a newline, without reading O, or reports that line is framed
// otherwise.
func split(line []byte) (typ string, obj []byte, ok bool) {
	rest, ok := bytes.CutPrefix(line, eventStart)
	if !ok {
		return "", nil, false
	}
	t, rest, ok := bytes.Cut(rest, objectStart)
	if !ok || bytes.IndexByte(t, '"') >= 0 || bytes.IndexByte(t, '\\') >= 0 {
		return "", nil, false
	}
	obj, ok = bytes.CutSuffix(rest, []byte("}\n"))
	return string(t), obj, ok
}

// metadata reads the metadata of the JSON object obj and stops there:
// kube writes it after kind and apiVersion, before the rest of the
// object, which is then never read.
func metadata(obj []byte) (objectMeta, error) {
	var m objectMeta
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return m, fmt.Errorf("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return m, err
		}
		if t == "metadata" {
			return m, dec.Decode(&m)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return m, err
		}
	}
	return m, nil
}

func (c *jsonCodec) added(obj []byte) ([]byte, error) {
	frame := make([]byte, 0, len(obj)+28)
	frame = append(frame, `{"type":"ADDED","object":`...)
	frame = append(frame, obj...)
	return append(frame, "}\n"...), nil
}

// protoCodec reads a stream of protobuf watch events, each preceded by
// its length.
type protoCodec struct{ r *bufio.Reader }

// maxFrame bounds one event of a protobuf stream, as client-go's
// decoder does.
const maxFrame = 16 << 20

// protoPrefix starts every object in Kubernetes' protobuf encoding.
var protoPrefix = []byte{'k', '8', 's', 0}

func (c *protoCodec) read() ([]byte, header, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, header{}, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return nil, header{}, fmt.Errorf("watch event of %d bytes, more than %d", n, maxFrame)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(c.r, frame[4:]); err != nil {
		return nil, header{}, unexpected(err)
	}
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(frame[4:]); err != nil {
		return nil, header{}, fmt.Errorf("decode watch event: %w", err)
	}
	h := header{typ: ev.Type, object: ev.Object.Raw}
	if !bytes.HasPrefix(h.object, protoPrefix) {
		return nil, header{}, fmt.Errorf("%s event's object is not in Kubernetes' protobuf encoding", ev.Type)
	}
	var u runtime.Unknown
	if err := u.Unmarshal(h.object[len(protoPrefix):]); err != nil {
		return nil, header{}, fmt.Errorf("decode %s event's object: %w", ev.Type, err)
	}
	if ev.Type != "ERROR" {
		// Every kind's metadata is its field 1, an ObjectMeta; an
		// ERROR's Status has a ListMeta there instead.
		meta, err := field(u.Raw, 1)
		if err != nil {
			return nil, header{}, fmt.Errorf("decode %s event's object: %w", ev.Type, err)
		}
		for _, f := range []struct {
			num protowire.Number
			to  *string
		}{{1, &h.name}, {3, &h.namespace}, {6, &h.version}} {
			v, err := field(meta, f.num)
			if err != nil {
				return nil, header{}, fmt.Errorf("decode %s event's metadata: %w", ev.Type, err)
			}
			*f.to = string(v)
		}
	}
	return frame, h, nil
}

func (c *protoCodec) added(obj []byte) ([]byte, error) {
	return kubeproto.EventFrame("ADDED", obj)
}

// field is the last value of the length-delimited field num of the
// protobuf message b, nil when it has none.
func field(b []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			out, b = v, b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
	}
	return out, nil
}

// unexpected is an end of the stream inside a frame.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
