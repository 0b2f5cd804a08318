package resource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/utils/clock"
)

// AgeCell prints how long ago an object was created ("5m", "3d"), as the
// AGE column of kube's printers does.
type AgeCell struct {
	// Clock is the time ages are measured to; nil is the real clock.
	Clock clock.PassiveClock
}

// Value implements Cell.
func (a AgeCell) Value(obj runtime.Object) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("read metadata of %T: %w", obj, err)
	}
	return humanAge(a.Clock, m.GetCreationTimestamp()), nil
}

func humanAge(c clock.PassiveClock, ts metav1.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return duration.HumanDuration(c.Since(ts.Time))
}

// JSONPathCell is the value at a JSONPath of an object, typed and printed
// the way kube-apiserver prints a CRD's additionalPrinterColumns: a path
// that finds nothing is nil, a value of the wrong type is nil, a date is
// an age.
type JSONPathCell struct {
	columnType string
	clock      clock.PassiveClock
	// mu guards path: a parsed JSONPath keeps state while it evaluates.
	mu   sync.Mutex
	path *jsonpath.JSONPath
}

// NewJSONPathCell parses path (such as ".spec.replicas") for a column of
// columnType: string, integer, number, boolean or date. A nil clock is the
// real clock.
func NewJSONPathCell(path, columnType string, c clock.PassiveClock) (*JSONPathCell, error) {
	p := jsonpath.New("column")
	if err := p.Parse(fmt.Sprintf("{%s}", path)); err != nil {
		return nil, fmt.Errorf("unrecognized column definition %q", path)
	}
	p.AllowMissingKeys(true)
	return &JSONPathCell{columnType: columnType, clock: c, path: p}, nil
}

// Value implements Cell.
func (j *JSONPathCell) Value(obj runtime.Object) (any, error) {
	var content map[string]any
	if u, ok := obj.(runtime.Unstructured); ok {
		content = u.UnstructuredContent()
	} else {
		var err error
		if content, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, fmt.Errorf("read %T as unstructured: %w", obj, err)
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	results, err := j.path.FindResults(content)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil, nil
	}
	value := results[0][0].Interface()
	if j.columnType == "string" {
		var buf bytes.Buffer
		if err := j.path.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err != nil {
			return nil, nil
		}
		return buf.String(), nil
	}
	return j.typed(value), nil
}

// typed is value as a cell of the column's type, or nil when it is not one.
func (j *JSONPathCell) typed(value any) any {
	switch j.columnType {
	case "integer":
		switch v := value.(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch v := value.(type) {
		case int64:
			return float64(v)
		case float64:
			return v
		case json.Number:
			if f, err := v.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "date":
		if s, ok := value.(string); ok {
			var ts metav1.Time
			if err := ts.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			return humanAge(j.clock, ts)
		}
	}
	return nil
}
