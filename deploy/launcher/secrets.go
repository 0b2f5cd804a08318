package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// BundleLabel, on a Secret StoreSecrets made, names the bundle it holds.
const BundleLabel = "kplane.dev/bundle"

// storeTimeout bounds storing every bundle in the cluster.
const storeTimeout = 2 * time.Minute

// SecretStore is where StoreSecrets keeps Secrets: one namespace's.
type SecretStore interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
	Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error)
}

// SecretName is the name of the Secret that holds the bundle called
// bundle.
func SecretName(prefix, bundle string) string { return prefix + "-" + bundle }

// StoreSecrets stores each bundle as Secret SecretName(prefix, name), its
// files the Secret's keys, and returns the names of the Secrets it made.
// Secrets already there are kept, never overwritten: an installation's
// credentials are issued once, and a second run issues a CA of its own.
// For the same reason, when some of the Secrets exist and others do not
// (a run that stopped half way, or Secrets supplied by hand), it stores
// none and fails: the missing ones would come from another CA than those
// there, and services holding the two could not trust each other.
func StoreSecrets(ctx context.Context, store SecretStore, prefix string, bundles map[string]Bundle) ([]string, error) {
	names := slices.Sorted(maps.Keys(bundles))
	var existing, missing []string
	for _, b := range names {
		name := SecretName(prefix, b)
		_, err := store.Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			existing = append(existing, name)
		case apierrors.IsNotFound(err):
			missing = append(missing, b)
		default:
			return nil, fmt.Errorf("read Secret %s: %w", name, err)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if len(existing) > 0 {
		return nil, fmt.Errorf("Secrets %s exist but not those of %s: issuing the missing ones would mix two CAs; delete %s and run again",
			strings.Join(existing, ", "), strings.Join(missing, ", "), strings.Join(existing, " "))
	}
	var created []string
	for _, b := range missing {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: SecretName(prefix, b),
				Labels: map[string]string{
					BundleLabel:                    b,
					"app.kubernetes.io/part-of":    "kplane",
					"app.kubernetes.io/managed-by": "kplane-up",
				},
			},
			Type: corev1.SecretTypeOpaque,
			Data: bundles[b],
		}
		if _, err := store.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return created, fmt.Errorf("create Secret %s: %w", s.Name, err)
		}
		created = append(created, s.Name)
	}
	return created, nil
}

// StoreInCluster stores bundles as StoreSecrets does, in namespace of the
// cluster this process runs in as a pod, with the pod's service account,
// and says on out what it did.
func StoreInCluster(ctx context.Context, namespace, prefix string, bundles map[string]Bundle, out io.Writer) error {
	if namespace == "" || prefix == "" {
		return errors.New("store Secrets: a namespace and a name prefix are required")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("store Secrets: %w", err)
	}
	cfg.Timeout = 30 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("store Secrets: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	created, err := StoreSecrets(ctx, client.CoreV1().Secrets(namespace), prefix, bundles)
	if err != nil {
		return err
	}
	if len(created) == 0 {
		fmt.Fprintf(out, "kept the Secrets %s-* of namespace %s\n", prefix, namespace)
		return nil
	}
	fmt.Fprintf(out, "created Secrets %s in namespace %s\n", strings.Join(created, ", "), namespace)
	return nil
}
