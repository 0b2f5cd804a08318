package patch

import (
	"bytes"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// Body is a PATCH request's body, checked as kube-apiserver checks it
// before reading the object. An apply configuration is converted from YAML
// to JSON here, once: YAML parsing is the costliest step of an apply after
// structured-merge-diff's, and kube's apply patcher parses the body twice
// on every try (once to decode it, once more for duplicate fields) where a
// Body parses it once however often the write is retried on a conflict.
type Body struct {
	// Type is the patch's format.
	Type types.PatchType
	// Raw is the body as the client sent it.
	Raw []byte
	// applyJSON is an apply configuration converted to JSON.
	applyJSON []byte
	// duplicates is an apply configuration's strict decoding error (its
	// duplicate fields) as kube's yaml.UnmarshalStrict words it; nil when
	// it has none.
	duplicates error
}

// NewBody checks a patch body of type pt: JSON for the JSON and merge
// patch types, YAML (or JSON) for apply, with kube-apiserver's 400s.
func NewBody(pt types.PatchType, raw []byte) (*Body, error) {
	b := &Body{Type: pt, Raw: raw}
	if pt != types.ApplyYAMLPatchType {
		if !json.Valid(raw) {
			return nil, apierrors.NewBadRequest("invalid JSON patch")
		}
		return b, nil
	}
	// The strict conversion fails on duplicate fields where the lenient
	// one keeps the last; without duplicates both give the same JSON.
	if j, err := sigsyaml.YAMLToJSONStrict(raw); err == nil {
		b.applyJSON = j
		return b, nil
	}
	j, err := sigsyaml.YAMLToJSON(raw)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error encoding patch: %v", err))
	}
	b.applyJSON = j
	b.duplicates = yaml.UnmarshalStrict(raw, &map[string]any{})
	return b, nil
}

// applyConfig decodes an apply configuration into obj as
// k8s.io/apimachinery's yaml.Unmarshal does (numbers as int64 or float64),
// from the JSON converted once. On an error it decodes the YAML again with
// yaml.Unmarshal itself, for kube's wording of it.
func (b *Body) applyConfig(obj *map[string]any) error {
	// As sigs.k8s.io/yaml's decoder, through an interface holding the
	// pointer: a null body then leaves obj as it is.
	var target any = obj
	d := json.NewDecoder(bytes.NewReader(b.applyJSON))
	d.UseNumber()
	if err := d.Decode(&target); err == nil && utiljson.ConvertMapNumbers(*obj, 0) == nil {
		return nil
	}
	*obj = map[string]any{}
	return yaml.Unmarshal(b.Raw, obj)
}
