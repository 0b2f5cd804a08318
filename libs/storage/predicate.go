package storage

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// AttrFunc returns the labels and the selectable fields of an object. The
// labels are always the object's own metadata.labels, as in kube; only
// the fields differ between kinds, which lets a label selector be
// matched without calling it.
type AttrFunc func(obj runtime.Object) (labels.Set, fields.Set, error)

// SelectionPredicate is a list's or watch's label and field selector,
// evaluated by the store.
type SelectionPredicate struct {
	// Label and Field nil mean everything.
	Label labels.Selector
	Field fields.Selector
	// GetAttrs nil means DefaultAttrs.
	GetAttrs AttrFunc
}

// Empty reports whether the predicate matches every object.
func (p SelectionPredicate) Empty() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}

// Matches reports whether obj satisfies both selectors.
func (p SelectionPredicate) Matches(obj runtime.Object) (bool, error) {
	if p.Empty() {
		return true, nil
	}
	if p.Field == nil || p.Field.Empty() {
		// A label selector alone, the common case of a controller's
		// list: the labels need no AttrFunc, whose fields.Set is one
		// allocation per object of the list.
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, fmt.Errorf("read object metadata: %w", err)
		}
		return p.Label.Matches(labels.Set(m.GetLabels())), nil
	}
	attrs := p.GetAttrs
	if attrs == nil {
		attrs = DefaultAttrs
	}
	ls, fs, err := attrs(obj)
	if err != nil {
		return false, err
	}
	if p.Label != nil && !p.Label.Matches(ls) {
		return false, nil
	}
	if p.Field != nil && !p.Field.Matches(fs) {
		return false, nil
	}
	return true, nil
}

// Matcher returns Matches, prepared for evaluating p on many objects. A
// field selector on metadata.name and metadata.namespace alone, which a
// client watching one object sends, is read off the object's metadata:
// every kind's AttrFunc sets those two fields from it, and the fields.Set
// an AttrFunc builds was two allocations per object per watch.
func (p SelectionPredicate) Matcher() func(runtime.Object) (bool, error) {
	if p.Field == nil || p.Field.Empty() || !onMetadataOnly(p.Field) {
		return p.Matches
	}
	return func(obj runtime.Object) (bool, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, fmt.Errorf("read object metadata: %w", err)
		}
		if p.Label != nil && !p.Label.Matches(labels.Set(m.GetLabels())) {
			return false, nil
		}
		return p.Field.Matches(metadataFields{m}), nil
	}
}

func onMetadataOnly(s fields.Selector) bool {
	for _, r := range s.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return false
		}
	}
	return true
}

// metadataFields are the fields DefaultAttrs selects on, read from the
// object's metadata when a selector asks for them.
type metadataFields struct{ m metav1.Object }

func (f metadataFields) Has(field string) bool {
	switch field {
	case "metadata.name":
		return true
	case "metadata.namespace":
		return f.m.GetNamespace() != ""
	}
	return false
}

func (f metadataFields) Get(field string) string {
	switch field {
	case "metadata.name":
		return f.m.GetName()
	case "metadata.namespace":
		return f.m.GetNamespace()
	}
	return ""
}

// DefaultAttrs selects on labels and on metadata.name and, for namespaced
// objects, metadata.namespace: the fields every kind supports.
func DefaultAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("read object metadata: %w", err)
	}
	fs := fields.Set{"metadata.name": m.GetName()}
	if ns := m.GetNamespace(); ns != "" {
		fs["metadata.namespace"] = ns
	}
	return labels.Set(m.GetLabels()), fs, nil
}
