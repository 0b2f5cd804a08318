package storage_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage"
)

// withType selects on a Secret's type besides the default fields.
func withType(o runtime.Object) (labels.Set, fields.Set, error) {
	ls, fs, err := storage.DefaultAttrs(o)
	fs["type"] = string(o.(*corev1.Secret).Type)
	return ls, fs, err
}

// failing is an AttrFunc that must not be needed.
func failing(runtime.Object) (labels.Set, fields.Set, error) {
	return nil, nil, errors.New("attrs read")
}

// predicate selects by label and field, each parsed unless empty.
func predicate(t *testing.T, label, field string, attrs storage.AttrFunc) storage.SelectionPredicate {
	t.Helper()
	p := storage.SelectionPredicate{GetAttrs: attrs}
	if label != "" {
		sel, err := labels.Parse(label)
		if err != nil {
			t.Fatal(err)
		}
		p.Label = sel
	}
	if field != "" {
		sel, err := fields.ParseSelector(field)
		if err != nil {
			t.Fatal(err)
		}
		p.Field = sel
	}
	return p
}

func TestMatches(t *testing.T) {
	obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Labels: map[string]string{"app": "web"}}, Type: corev1.SecretTypeOpaque}
	tests := []struct {
		name    string
		label   string
		field   string
		attrs   storage.AttrFunc
		want    bool
		wantErr bool
	}{
		{name: "no selector", want: true, attrs: failing},
		{name: "label selector matches, without the attrs", label: "app=web", attrs: failing, want: true},
		{name: "label selector does not match, without the attrs", label: "app in (db,cache)", attrs: failing},
		{name: "field of the kind", field: "type=Opaque", attrs: withType, want: true},
		{name: "field of the kind does not match", field: "type=kubernetes.io/tls", attrs: withType},
		{name: "default fields", field: "metadata.name=s,metadata.namespace=ns", want: true},
		{name: "both, field not matching", label: "app=web", field: "metadata.name=other"},
		{name: "both match", label: "app", field: "metadata.name=s", attrs: withType, want: true},
		{name: "a field selector needs the attrs", field: "metadata.name=s", attrs: failing, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := predicate(t, tt.label, tt.field, tt.attrs).Matches(obj)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("Matches = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// BenchmarkMatchesLabelSelector is the per-object cost of a list by label
// selector from the watch cache.
func BenchmarkMatchesLabelSelector(b *testing.B) {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-1", Namespace: "ns", Labels: map[string]string{"group": "3", "app": "web"}}}
	p := storage.SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"group": "3"}), GetAttrs: storage.DefaultAttrs}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := p.Matches(obj); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func TestMatcher(t *testing.T) {
	namespaced := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Labels: map[string]string{"app": "web"}}, Type: corev1.SecretTypeOpaque}
	clusterScoped := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	tests := []struct {
		name    string
		obj     runtime.Object
		label   string
		field   string
		attrs   storage.AttrFunc
		want    bool
		wantErr bool
	}{
		{name: "name, without the attrs", obj: namespaced, field: "metadata.name=s", attrs: failing, want: true},
		{name: "other name, without the attrs", obj: namespaced, field: "metadata.name=t", attrs: failing},
		{name: "name and namespace", obj: namespaced, field: "metadata.name=s,metadata.namespace=ns", attrs: failing, want: true},
		{name: "name not in another namespace", obj: namespaced, field: "metadata.name=s,metadata.namespace!=ns", attrs: failing},
		{name: "labels and name", obj: namespaced, label: "app=web", field: "metadata.name=s", attrs: failing, want: true},
		{name: "labels not matching", obj: namespaced, label: "app=db", field: "metadata.name=s", attrs: failing},
		{name: "no namespace of a cluster-scoped object", obj: clusterScoped, field: "metadata.namespace=", want: true},
		{name: "a cluster-scoped object is in no namespace", obj: clusterScoped, field: "metadata.namespace=ns"},
		{name: "a field of the kind needs the attrs", obj: namespaced, field: "metadata.name=s,type=Opaque", attrs: withType, want: true},
		{name: "a field of the kind fails with the attrs", obj: namespaced, field: "type=Opaque", attrs: failing, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := predicate(t, tt.label, tt.field, tt.attrs)
			got, err := p.Matcher()(tt.obj)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("Matcher()(obj) = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
			if tt.attrs != nil && !tt.wantErr {
				return
			}
			// With the default attrs, Matches must agree.
			p.GetAttrs = nil
			if want, err := p.Matches(tt.obj); !tt.wantErr && (err != nil || want != got) {
				t.Errorf("Matches = %v, %v; Matcher said %v", want, err, got)
			}
		})
	}
}

// BenchmarkMatcherName is the per-event cost of a watch of one object by
// name, which every watcher of the resource evaluates on every change.
func BenchmarkMatcherName(b *testing.B) {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-1", Namespace: "ns", Labels: map[string]string{"app": "web"}}}
	p := storage.SelectionPredicate{Field: fields.OneTermEqualSelector("metadata.name", "cm-1"), GetAttrs: storage.DefaultAttrs}
	for _, bc := range []struct {
		name  string
		match func(runtime.Object) (bool, error)
	}{{"Matches", p.Matches}, {"Matcher", p.Matcher()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := bc.match(obj); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
