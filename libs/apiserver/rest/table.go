package rest

import (
	"fmt"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/resource"
)

// objectMetaDocs describes the NAME and AGE columns in kube's words.
var objectMetaDocs = metav1.ObjectMeta{}.SwaggerDoc()

// tableOptions reads includeObject from the query when a Table is asked
// for, with kube's messages for values it does not know.
func tableOptions(query url.Values, out output) (*metav1.TableOptions, error) {
	if out.as == nil || out.as.Kind != "Table" {
		return nil, nil
	}
	opts := &metav1.TableOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	switch errs := metav1validation.ValidateTableOptions(opts); len(errs) {
	case 0:
		return opts, nil
	case 1:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
}

// transform converts obj to the meta.k8s.io kind out asks for. A Status is
// sent as it is, whatever was asked.
func (h *Handler) transform(obj runtime.Object, out output, topts *metav1.TableOptions) (runtime.Object, error) {
	if _, ok := obj.(*metav1.Status); ok || out.as == nil {
		return obj, nil
	}
	gv := out.as.GroupVersion()
	switch out.as.Kind {
	case "Table":
		return h.table(obj, gv, topts)
	case "PartialObjectMetadata":
		if meta.IsListType(obj) {
			return nil, notAcceptableMessage(fmt.Sprintf("you requested PartialObjectMetadata, but the requested object is a list (%T)", obj))
		}
		return partialMetadata(obj, gv)
	case "PartialObjectMetadataList":
		return partialMetadataList(obj, gv)
	}
	return nil, notAcceptable(mediaJSON, mediaYAML)
}

func partialMetadata(obj runtime.Object, gv schema.GroupVersion) (*metav1.PartialObjectMetadata, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("read metadata of %T: %w", obj, err)
	}
	p := meta.AsPartialObjectMetadata(m)
	p.GetObjectKind().SetGroupVersionKind(gv.WithKind("PartialObjectMetadata"))
	return p, nil
}

func partialMetadataList(obj runtime.Object, gv schema.GroupVersion) (*metav1.PartialObjectMetadataList, error) {
	li, ok := obj.(metav1.ListInterface)
	if !ok {
		return nil, notAcceptableMessage(fmt.Sprintf("you requested PartialObjectMetadataList, but the requested object is not a list (%T)", obj))
	}
	list := &metav1.PartialObjectMetadataList{Items: []metav1.PartialObjectMetadata{}}
	err := meta.EachListItem(obj, func(item runtime.Object) error {
		p, err := partialMetadata(item, gv)
		if err != nil {
			return err
		}
		list.Items = append(list.Items, *p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	list.ResourceVersion = li.GetResourceVersion()
	list.Continue = li.GetContinue()
	list.RemainingItemCount = li.GetRemainingItemCount()
	list.GetObjectKind().SetGroupVersionKind(gv.WithKind("PartialObjectMetadataList"))
	return list, nil
}

// columns are the resource's table columns after NAME: its own, or kube's
// default AGE for a resource that declares none (as for a CRD without
// additionalPrinterColumns).
func (h *Handler) columns() []resource.Column {
	if h.r.Columns != nil {
		return h.r.Columns
	}
	return []resource.Column{{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Age", Type: "date", Description: objectMetaDocs["creationTimestamp"]},
		Cell:                  resource.AgeCell{Clock: h.clock},
	}}
}

// table renders obj, one object or a list, as a metav1.Table of version gv.
func (h *Handler) table(obj runtime.Object, gv schema.GroupVersion, opts *metav1.TableOptions) (*metav1.Table, error) {
	cols := h.columns()
	t := &metav1.Table{}
	if !opts.NoHeaders {
		t.ColumnDefinitions = make([]metav1.TableColumnDefinition, 0, len(cols)+1)
		if !h.r.ColumnsIncludeName {
			t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{
				Name: "Name", Type: "string", Format: "name", Description: objectMetaDocs["name"],
			})
		}
		for _, c := range cols {
			t.ColumnDefinitions = append(t.ColumnDefinitions, c.TableColumnDefinition)
		}
	}
	items := []runtime.Object{obj}
	if meta.IsListType(obj) {
		li, err := meta.ListAccessor(obj)
		if err != nil {
			return nil, fmt.Errorf("read list metadata of %T: %w", obj, err)
		}
		t.ResourceVersion = li.GetResourceVersion()
		t.Continue = li.GetContinue()
		t.RemainingItemCount = li.GetRemainingItemCount()
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, fmt.Errorf("read list items of %T: %w", obj, err)
		}
	} else if m, err := meta.Accessor(obj); err == nil {
		t.ResourceVersion = m.GetResourceVersion()
	}
	t.Rows = make([]metav1.TableRow, 0, len(items))
	for _, item := range items {
		row, err := h.tableRow(item, cols, gv, opts)
		if err != nil {
			return nil, err
		}
		t.Rows = append(t.Rows, row)
	}
	t.GetObjectKind().SetGroupVersionKind(gv.WithKind("Table"))
	return t, nil
}

func (h *Handler) tableRow(obj runtime.Object, cols []resource.Column, gv schema.GroupVersion, opts *metav1.TableOptions) (metav1.TableRow, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return metav1.TableRow{}, fmt.Errorf("read metadata of %T: %w", obj, err)
	}
	row := metav1.TableRow{Cells: make([]any, 0, len(cols)+1)}
	if !h.r.ColumnsIncludeName {
		row.Cells = append(row.Cells, m.GetName())
	}
	for _, c := range cols {
		v, err := c.Cell.Value(obj)
		if err != nil {
			return metav1.TableRow{}, fmt.Errorf("compute column %q of %s: %w", c.Name, m.GetName(), err)
		}
		row.Cells = append(row.Cells, v)
	}
	// The bookmark ending a watch's initial events keeps its annotation
	// whatever was asked, or the client would miss the end.
	initialEnd := m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
	switch {
	case opts.IncludeObject == metav1.IncludeObject:
		row.Object.Object = obj
	case opts.IncludeObject == metav1.IncludeMetadata, opts.IncludeObject == "", initialEnd:
		p, err := partialMetadata(obj, gv)
		if err != nil {
			return metav1.TableRow{}, err
		}
		row.Object.Object = p
	case opts.IncludeObject == metav1.IncludeNone:
	default:
		return metav1.TableRow{}, apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", opts.IncludeObject))
	}
	return row, nil
}
