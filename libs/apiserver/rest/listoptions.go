package rest

import (
	"fmt"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/storage"
)

// listOptions reads a list's or watch's query the way kube-apiserver does:
// decoded by the meta.k8s.io parameter codec (400 on a malformed
// selector), defaulted and validated (422 on contradicting options), and
// field selectors limited to the fields the resource can select on.
func (h *Handler) listOptions(query url.Values, info *requestinfo.Info) (*metainternalversion.ListOptions, error) {
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	// The verb is what the gateway authorized: request info read ?watch
	// by the same rule (requestinfo.ListOptions), and /watch/ paths are
	// watches without it.
	opts.Watch = info.Verb == "watch"
	// WatchList is on in the kube versions clients are built against: a
	// watch from "now" starts with the current state.
	metainternalversion.SetListOptionsDefaults(opts, true)
	if errs := metainternalversionvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		supported, err := h.selectableFields()
		if err != nil {
			return nil, err
		}
		opts.FieldSelector, err = opts.FieldSelector.Transform(func(label, value string) (string, string, error) {
			if !supported[label] {
				if h.r.Attrs == nil {
					// Kinds with no field selectors of their own answer
					// as kube's DefaultMetaV1FieldSelectorConversion.
					return "", "", fmt.Errorf("%q is not a known field selector: only %q, %q", label, "metadata.name", "metadata.namespace")
				}
				return "", "", fmt.Errorf("field label not supported: %s", label)
			}
			return label, value, nil
		})
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	// A watch of one object by path (/watch/namespaces/x/configmaps/y)
	// selects it by name, and must not select another one by field.
	if len(info.Parts) >= 2 && info.Name != "" {
		if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
			if selected, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); !ok || selected != info.Name {
				return nil, apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
			}
		} else {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", info.Name)
		}
	}
	return opts, nil
}

// selectableFields are the field labels the resource's attribute function
// produces, plus the metadata fields every kind can be selected on.
func (h *Handler) selectableFields() (map[string]bool, error) {
	sample := h.r.Objects.New()
	m, err := meta.Accessor(sample)
	if err != nil {
		return nil, fmt.Errorf("read metadata of %T: %w", sample, err)
	}
	m.SetName("sample")
	m.SetNamespace("sample")
	_, fs, err := h.r.AttrFunc()(sample)
	if err != nil {
		return nil, fmt.Errorf("read selectable fields of %s: %w", h.r.GroupVersionResource, err)
	}
	supported := map[string]bool{"metadata.name": true, "metadata.namespace": true}
	for k := range fs {
		supported[k] = true
	}
	return supported, nil
}

// predicate is the storage predicate of opts.
func (h *Handler) predicate(opts *metainternalversion.ListOptions) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: opts.LabelSelector, Field: opts.FieldSelector, GetAttrs: h.r.AttrFunc()}
}

// collectionPrefix is where a list or watch of info reads: one namespace,
// or every object of the resource.
func (h *Handler) collectionPrefix(info *requestinfo.Info) string {
	if h.r.Namespaced && info.Namespace != "" {
		return h.keys.NamespacePrefix(info.Namespace)
	}
	return h.keys.Prefix()
}
