package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"kplane.dev/libs/apiserver/kubeproto"
	"kplane.dev/libs/apiserver/objects"
)

// writeObject sends obj with status code in the form the request's Accept
// header asks for. Every handler answers through it.
func (h *Handler) writeObject(c echo.Context, code int, obj runtime.Object) error {
	out, err := negotiate(c.Request(), false, h.offers)
	if err != nil {
		return err
	}
	return h.respond(c, code, obj, out)
}

// respond converts obj to the negotiated form and writes it.
func (h *Handler) respond(c echo.Context, code int, obj runtime.Object, out output) error {
	topts, err := tableOptions(c.QueryParams(), out)
	if err != nil {
		return err
	}
	if meta.IsListType(obj) && meta.LenList(obj) == 0 {
		// An empty list has "items": [], never null.
		if err := meta.SetList(obj, []runtime.Object{}); err != nil {
			return fmt.Errorf("empty list items of %T: %w", obj, err)
		}
	}
	obj, err = h.transform(obj, out, topts)
	if err != nil {
		return err
	}
	data, contentType, err := h.encodeList(obj, out)
	if err == nil && data == nil {
		data, contentType, err = encode(obj, out)
	}
	if err != nil {
		return err
	}
	// Known ahead, the length lets the gateway pass a large answer on
	// in full frames instead of flushing each piece it reads.
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(data)))
	return c.Blob(code, contentType, data)
}

// writeStored sends obj, an object as stored, in compact JSON or in
// protobuf, as respond would, its encoding shared through h.encodings
// with the lists, watches and other gets of the same state: an object
// read again and again between writes is encoded once.
func (h *Handler) writeStored(c echo.Context, obj runtime.Object, out output) error {
	encode, contentType := jsonObject, mediaJSON
	if out.protobuf {
		encode, contentType = kubeproto.Encode, kubeproto.MediaType
	}
	raw, err := h.encodings.encode(obj, false, out.protobuf, encode)
	if err != nil {
		return fmt.Errorf("encode %T: %w", obj, err)
	}
	data := raw
	if !out.protobuf {
		// The cache's bytes are shared: the newline goes on a copy.
		data = make([]byte, len(raw)+1)
		copy(data, raw)
		data[len(raw)] = '\n'
	}
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(data)))
	return c.Blob(http.StatusOK, contentType, data)
}

// listItemsTail is how json.Marshal ends a typed list without items: its
// items come last.
const listItemsTail = `"items":[]}`

// encodeList returns a list of stored objects in compact JSON as encode
// does, each item's encoding shared through h.encodings; nil when obj is
// not such a list (another form, a table, a list whose items do not come
// last, as an unstructured list's do not) or has no items.
func (h *Handler) encodeList(obj runtime.Object, out output) ([]byte, string, error) {
	if out.as != nil || out.protobuf || out.yaml || out.pretty || !meta.IsListType(obj) {
		return nil, "", nil
	}
	itemsPtr, err := meta.GetItemsPtr(obj)
	if err != nil {
		return nil, "", nil
	}
	items := reflect.ValueOf(itemsPtr).Elem()
	if items.Kind() != reflect.Slice || items.Len() == 0 {
		return nil, "", nil
	}
	objs, err := meta.ExtractList(obj)
	if err != nil {
		return nil, "", nil
	}
	full := items.Interface()
	items.Set(reflect.MakeSlice(items.Type(), 0, 0))
	head, err := objects.JSON(obj)
	items.Set(reflect.ValueOf(full))
	if err != nil {
		return nil, "", fmt.Errorf("encode %T: %w", obj, err)
	}
	if !bytes.HasSuffix(head, []byte(listItemsTail)) {
		return nil, "", nil
	}
	raws := make([][]byte, len(objs))
	size := len(head) + len(objs)
	for i, item := range objs {
		raw, err := h.encodings.encode(item, false, false, jsonObject)
		if err != nil {
			return nil, "", fmt.Errorf("encode %T: %w", item, err)
		}
		raws[i] = raw
		size += len(raw)
	}
	// Sized once: growing a list's megabytes as it fills was a seventh
	// of core's CPU.
	data := make([]byte, 0, size+1)
	data = append(data, head[:len(head)-2]...)
	for i, raw := range raws {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, raw...)
	}
	return append(data, "]}\n"...), mediaJSON, nil
}

// encode serializes obj as JSON or YAML, ending in a newline as kube's
// serializers do, or as protobuf.
func encode(obj runtime.Object, out output) ([]byte, string, error) {
	if out.protobuf {
		data, err := kubeproto.Encode(obj)
		return data, kubeproto.MediaType, err
	}
	data, err := objects.JSON(obj)
	if err != nil {
		return nil, "", fmt.Errorf("encode %T: %w", obj, err)
	}
	switch {
	case out.yaml:
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			return nil, "", fmt.Errorf("encode %T as yaml: %w", obj, err)
		}
		return y, mediaYAML, nil
	case out.pretty:
		var buf bytes.Buffer
		if err := json.Indent(&buf, data, "", "  "); err != nil {
			return nil, "", fmt.Errorf("indent %T: %w", obj, err)
		}
		buf.WriteByte('\n')
		return buf.Bytes(), mediaJSON, nil
	}
	return append(data, '\n'), mediaJSON, nil
}
