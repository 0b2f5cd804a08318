package serviceaccount_test

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// objects is an in-memory Getter: the lookup seam the service fills from its
// store, here filled by the test.
type objects struct {
	mu              sync.Mutex
	serviceAccounts map[string]*corev1.ServiceAccount
	secrets         map[string]*corev1.Secret
	pods            map[string]*corev1.Pod
	nodes           map[string]*corev1.Node
}

func newObjects() *objects {
	return &objects{
		serviceAccounts: map[string]*corev1.ServiceAccount{},
		secrets:         map[string]*corev1.Secret{},
		pods:            map[string]*corev1.Pod{},
		nodes:           map[string]*corev1.Node{},
	}
}

func (o *objects) add(objs ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, obj := range objs {
		switch obj := obj.(type) {
		case *corev1.ServiceAccount:
			o.serviceAccounts[obj.Namespace+"/"+obj.Name] = obj
		case *corev1.Secret:
			o.secrets[obj.Namespace+"/"+obj.Name] = obj
		case *corev1.Pod:
			o.pods[obj.Namespace+"/"+obj.Name] = obj
		case *corev1.Node:
			o.nodes[obj.Name] = obj
		default:
			panic("unknown object type")
		}
	}
}

func get[T any](o *objects, m map[string]*T, resource, key, name string) (*T, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if obj, ok := m[key]; ok {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
}

func (o *objects) GetServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	return get(o, o.serviceAccounts, "serviceaccounts", ns+"/"+name, name)
}

func (o *objects) GetSecret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	return get(o, o.secrets, "secrets", ns+"/"+name, name)
}

func (o *objects) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	return get(o, o.pods, "pods", ns+"/"+name, name)
}

func (o *objects) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	return get(o, o.nodes, "nodes", name, name)
}
