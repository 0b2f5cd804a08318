package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"kplane.dev/libs/apiserver/kubeproto"
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
	data, contentType, err := encode(obj, out)
	if err != nil {
		return err
	}
	// Known ahead, the length lets the gateway pass a large answer on
	// in full frames instead of flushing each piece it reads.
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(data)))
	return c.Blob(code, contentType, data)
}

// encode serializes obj as JSON or YAML, ending in a newline as kube's
// serializers do, or as protobuf.
func encode(obj runtime.Object, out output) ([]byte, string, error) {
	if out.protobuf {
		data, err := kubeproto.Encode(obj)
		return data, kubeproto.MediaType, err
	}
	data, err := json.Marshal(obj)
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
