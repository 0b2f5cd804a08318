package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// widgetsResource is the custom resource of the cr- workloads, a
// namespaced Widget whose spec carries what a ConfigMap of the load
// carries: data of --object-size bytes, and a number the updates change.
var widgetsResource = schema.GroupVersionResource{Group: "load.kplane.dev", Version: "v1", Resource: "widgets"}

// managedByLabel on the CRD says that kplane-load made it, and so may
// reuse it.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "kplane-load"
)

// pollInterval paces the waits of setup for the CRD to be served or gone.
const pollInterval = 100 * time.Millisecond

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   widgetsResource.Resource + "." + widgetsResource.Group,
			Labels: map[string]string{managedByLabel: managedBy},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetsResource.Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: widgetsResource.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {
							Type: "object",
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"data": {Type: "string"},
								"seq":  {Type: "integer"},
							},
						},
					},
				}},
			}},
		},
	}
}

func widget(ref objectRef, labels map[string]string, data string, seq int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetsResource.GroupVersion().String(),
		"kind":       "Widget",
		"spec":       map[string]any{"data": data, "seq": int64(seq)},
	}}
	u.SetNamespace(ref.namespace)
	u.SetName(ref.name)
	u.SetLabels(labels)
	return u
}

// setupCustomResources makes the CRD, or reuses it, waits until its
// objects are served and makes as many of them as there are ConfigMaps,
// in the same namespaces, under the same names and labels.
func (s *side) setupCustomResources(ctx context.Context, o *Options, payload string) error {
	ctx, cancel := context.WithTimeout(ctx, o.bulkTimeout())
	defer cancel()
	if err := s.ensureCRD(ctx); err != nil {
		return err
	}
	// Established says that the CRD's names are accepted; the server may
	// route its objects a moment later (kube: once discovery has it). A
	// list that succeeds says they are routed.
	var lastErr error
	if err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		_, lastErr = s.widgets.Namespace(s.namespaces[0]).List(ctx, metav1.ListOptions{Limit: 1})
		return lastErr == nil, nil
	}); err != nil {
		if lastErr != nil {
			err = fmt.Errorf("%w; last list: %w", err, lastErr)
		}
		return fmt.Errorf("wait for %s to be served: %w", widgetsResource.GroupResource(), err)
	}
	return parallel(ctx, o.Workers, o.Objects, func(ctx context.Context, i int) error {
		ref := s.object(o, i)
		_, err := s.widgets.Namespace(ref.namespace).Create(ctx, widget(ref, s.labels(i), payload, 0), metav1.CreateOptions{})
		return err
	})
}

// ensureCRD creates the CRD, or takes one that kplane-load made before (in
// a run that did not finish, or for another side on the same server),
// after one being deleted is gone, and waits until it is established.
func (s *side) ensureCRD(ctx context.Context) error {
	want := widgetCRD()
	crds := s.crds.ApiextensionsV1().CustomResourceDefinitions()
	if err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err := crds.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return false, nil // made meanwhile by someone else: look again
			}
			if err != nil {
				return false, fmt.Errorf("create customresourcedefinition %s: %w", want.Name, err)
			}
			s.ownsCRD = true
			return false, nil
		case err != nil:
			return false, fmt.Errorf("read customresourcedefinition %s: %w", want.Name, err)
		case crd.Labels[managedByLabel] != managedBy:
			return false, fmt.Errorf("customresourcedefinition %s exists without the label %s=%s: kplane-load did not make it and will not use it; delete it, or run no cr- workload", want.Name, managedByLabel, managedBy)
		case crd.DeletionTimestamp != nil:
			return false, nil // still deleting its objects
		}
		if c := apihelpers.FindCRDCondition(crd, apiextensionsv1.NamesAccepted); c != nil && c.Status == apiextensionsv1.ConditionFalse {
			return false, fmt.Errorf("customresourcedefinition %s: names not accepted: %s", want.Name, c.Message)
		}
		return apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established), nil
	}); err != nil {
		return fmt.Errorf("wait for customresourcedefinition %s to be established: %w", want.Name, err)
	}
	return nil
}

// deleteCRD deletes the CRD and with it every object of it left on the
// server; the server finishes that after the call.
func (s *side) deleteCRD(ctx context.Context) error {
	name := widgetCRD().Name
	err := s.crds.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete customresourcedefinition %s: %w", name, err)
	}
	return nil
}

// deleteCustomResource deletes a Widget; one already gone, or gone with
// its CRD, is no error.
func (s *side) deleteCustomResource(ctx context.Context, ref objectRef) error {
	err := s.widgets.Namespace(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", widgetsResource.GroupResource(), ref.namespace, ref.name, err)
	}
	return nil
}

func crGet(ctx context.Context, o *Options, s *side, _, _, _ int) (bool, error) {
	ref := s.object(o, rand.IntN(o.Objects))
	_, err := s.widgets.Namespace(ref.namespace).Get(ctx, ref.name, metav1.GetOptions{})
	return false, err
}

// crUpdate is update's get and put of the object with a new spec.seq.
func crUpdate(ctx context.Context, o *Options, s *side, _, worker, seq int) (bool, error) {
	ref := s.object(o, ownObject(o, worker, seq))
	widgets := s.widgets.Namespace(ref.namespace)
	w, err := widgets.Get(ctx, ref.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if err := unstructured.SetNestedField(w.Object, int64(seq), "spec", "seq"); err != nil {
		return false, fmt.Errorf("set spec.seq of %s/%s: %w", ref.namespace, ref.name, err)
	}
	_, err = widgets.Update(ctx, w, metav1.UpdateOptions{})
	return false, err
}

// crList reads the first namespace's Widgets and, as list, checks that
// it got those made at setup.
func crList(ctx context.Context, o *Options, s *side, _, _, _ int) (bool, error) {
	l, err := s.widgets.Namespace(s.namespaces[0]).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	n := 0
	for _, w := range l.Items {
		if _, ok := w.GetLabels()[groupLabel]; ok {
			n++
		}
	}
	if n != o.inFirstNamespace() {
		return false, fmt.Errorf("list of %s: %d, want %d", widgetsResource.GroupResource(), n, o.inFirstNamespace())
	}
	return false, nil
}

// crCreate makes Widgets in one namespace after the other, as create
// does ConfigMaps.
func crCreate(ctx context.Context, o *Options, s *side, round, _, seq int) (bool, error) {
	ref := s.createdObject(round, seq)
	return false, s.customResources.create(ref, func() error {
		_, err := s.widgets.Namespace(ref.namespace).Create(ctx, widget(ref, nil, fmt.Sprintf("%0*d", o.ObjectSize, seq), seq), metav1.CreateOptions{})
		return err
	})
}

// crDelete deletes the Widgets crCreate made this round, as remove does
// ConfigMaps.
func crDelete(ctx context.Context, _ *Options, s *side, _, _, seq int) (bool, error) {
	ref, ok := s.customResources.nth(seq)
	if !ok {
		return true, nil
	}
	return false, s.widgets.Namespace(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{})
}
