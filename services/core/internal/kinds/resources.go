package kinds

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/eventconv"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/services/core/internal/namespace"
	"kplane.dev/services/core/internal/reviews"
	"kplane.dev/services/core/internal/validation/admissionregistration"
	"kplane.dev/services/core/internal/validation/apiregistration"
	"kplane.dev/services/core/internal/validation/coordination"
	validationcorev1 "kplane.dev/services/core/internal/validation/corev1"
	"kplane.dev/services/core/internal/validation/events"
	"kplane.dev/services/core/internal/validation/rbac"
)

// apiExtensions is the category kube gives the kinds that extend the API.
const apiExtensions = "api-extensions"

// The resources core serves, by group-version-resource.
var (
	Namespaces                        = corev1.SchemeGroupVersion.WithResource("namespaces")
	ConfigMaps                        = corev1.SchemeGroupVersion.WithResource("configmaps")
	Secrets                           = corev1.SchemeGroupVersion.WithResource("secrets")
	ServiceAccounts                   = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	CoreEvents                        = corev1.SchemeGroupVersion.WithResource("events")
	Leases                            = coordinationv1.SchemeGroupVersion.WithResource("leases")
	Events                            = eventsv1.SchemeGroupVersion.WithResource("events")
	Roles                             = rbacv1.SchemeGroupVersion.WithResource("roles")
	RoleBindings                      = rbacv1.SchemeGroupVersion.WithResource("rolebindings")
	ClusterRoles                      = rbacv1.SchemeGroupVersion.WithResource("clusterroles")
	ClusterRoleBindings               = rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings")
	MutatingWebhookConfigurations     = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")
	ValidatingWebhookConfigurations   = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")
	ValidatingAdmissionPolicies       = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")
	ValidatingAdmissionPolicyBindings = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings")
	MutatingAdmissionPolicies         = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicies")
	MutatingAdmissionPolicyBindings   = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicybindings")
	APIServices                       = apiregistrationv1.SchemeGroupVersion.WithResource("apiservices")
)

// Resources declares every resource core serves. Ages in tables are
// measured with c (nil: real clock).
func Resources(c clock.PassiveClock) ([]*resource.Resource, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	rs := []*resource.Resource{
		{
			GroupVersionResource: Namespaces, Kind: "Namespace", Singular: "namespace",
			ShortNames: []string{"ns"},
			// Kube serves no deletecollection of namespaces.
			Verbs:        []string{"create", "delete", "get", "list", "patch", "update", "watch"},
			Subresources: resource.Subresources{Status: true, StatusWithMetadata: true, Finalize: true},
			Columns:      namespaceColumns(c),
			Strategy:     namespace.Strategy(),
			Attrs:        withFields(namespaceFields),
		},
		{
			GroupVersionResource: ConfigMaps, Kind: "ConfigMap", Singular: "configmap", Namespaced: true,
			ShortNames: []string{"cm"},
			Columns:    configMapColumns(c),
			Strategy:   validationcorev1.ConfigMapStrategy(),
		},
		{
			GroupVersionResource: Secrets, Kind: "Secret", Singular: "secret", Namespaced: true,
			Columns:  secretColumns(c),
			Strategy: validationcorev1.SecretStrategy(),
			Attrs:    withFields(secretFields),
		},
		{
			GroupVersionResource: ServiceAccounts, Kind: "ServiceAccount", Singular: "serviceaccount", Namespaced: true,
			ShortNames: []string{"sa"},
			Columns:    serviceAccountColumns(c),
			Strategy:   validationcorev1.ServiceAccountStrategy(),
		},
		{
			GroupVersionResource: CoreEvents, Kind: "Event", Singular: "event", Namespaced: true,
			ShortNames:         []string{"ev"},
			Columns:            eventColumns(c, func(ev *corev1.Event) *corev1.Event { return ev }),
			ColumnsIncludeName: true,
			Strategy:           validationcorev1.EventStrategy(),
			Attrs:              withFields(coreEventFields),
			Equivalents:        []resource.Equivalent{{Resource: Events, Kind: Events.GroupVersion().WithKind("Event")}},
		},
		{
			GroupVersionResource: Leases, Kind: "Lease", Singular: "lease", Namespaced: true,
			Columns:  leaseColumns(c),
			Strategy: coordination.LeaseStrategy(),
		},
		{
			GroupVersionResource: Events, Kind: "Event", Singular: "event", Namespaced: true,
			ShortNames:         []string{"ev"},
			Columns:            eventColumns(c, eventconv.ToCore),
			ColumnsIncludeName: true,
			Strategy:           events.Strategy(),
			Attrs:              withFields(eventsEventFields),
			Equivalents:        []resource.Equivalent{{Resource: CoreEvents, Kind: CoreEvents.GroupVersion().WithKind("Event")}},
		},
		{
			GroupVersionResource: Roles, Kind: "Role", Singular: "role", Namespaced: true,
			Columns:  roleColumns[*rbacv1.Role](),
			Strategy: rbac.RoleStrategy(),
		},
		{
			GroupVersionResource: RoleBindings, Kind: "RoleBinding", Singular: "rolebinding", Namespaced: true,
			Columns: roleBindingColumns(c, func(b *rbacv1.RoleBinding) (rbacv1.RoleRef, []rbacv1.Subject) {
				return b.RoleRef, b.Subjects
			}),
			Strategy: rbac.RoleBindingStrategy(),
		},
		{
			GroupVersionResource: ClusterRoles, Kind: "ClusterRole", Singular: "clusterrole",
			Columns:  roleColumns[*rbacv1.ClusterRole](),
			Strategy: rbac.ClusterRoleStrategy(),
		},
		{
			GroupVersionResource: ClusterRoleBindings, Kind: "ClusterRoleBinding", Singular: "clusterrolebinding",
			Columns: roleBindingColumns(c, func(b *rbacv1.ClusterRoleBinding) (rbacv1.RoleRef, []rbacv1.Subject) {
				return b.RoleRef, b.Subjects
			}),
			Strategy: rbac.ClusterRoleBindingStrategy(),
		},
		{
			GroupVersionResource: MutatingWebhookConfigurations, Kind: "MutatingWebhookConfiguration", Singular: "mutatingwebhookconfiguration",
			// Kube keeps a generation for these, as for every kind with a spec.
			Generation: true,
			Categories: []string{apiExtensions},
			Columns: webhookColumns(c, func(w *admissionregistrationv1.MutatingWebhookConfiguration) int {
				return len(w.Webhooks)
			}),
			Strategy: admissionregistration.MutatingWebhookConfigurationStrategy(),
		},
		{
			GroupVersionResource: ValidatingWebhookConfigurations, Kind: "ValidatingWebhookConfiguration", Singular: "validatingwebhookconfiguration",
			// Kube keeps a generation for these, as for every kind with a spec.
			Generation: true,
			Categories: []string{apiExtensions},
			Columns: webhookColumns(c, func(w *admissionregistrationv1.ValidatingWebhookConfiguration) int {
				return len(w.Webhooks)
			}),
			Strategy: admissionregistration.ValidatingWebhookConfigurationStrategy(),
		},
		{
			GroupVersionResource: ValidatingAdmissionPolicies, Kind: "ValidatingAdmissionPolicy", Singular: "validatingadmissionpolicy",
			// Kube keeps a generation for these, as for every kind with a spec.
			Generation:   true,
			Categories:   []string{apiExtensions},
			Subresources: resource.Subresources{Status: true},
			Columns:      validatingAdmissionPolicyColumns(c),
			Strategy:     admissionregistration.ValidatingAdmissionPolicyStrategy(),
		},
		{
			GroupVersionResource: ValidatingAdmissionPolicyBindings, Kind: "ValidatingAdmissionPolicyBinding", Singular: "validatingadmissionpolicybinding",
			// Kube keeps a generation for these, as for every kind with a spec.
			Generation: true,
			Categories: []string{apiExtensions},
			Columns:    validatingAdmissionPolicyBindingColumns(c),
			Strategy:   admissionregistration.ValidatingAdmissionPolicyBindingStrategy(),
		},
		{
			GroupVersionResource: MutatingAdmissionPolicies, Kind: "MutatingAdmissionPolicy", Singular: "mutatingadmissionpolicy",
			// Kube keeps a generation for these, as for every kind with a
			// spec; the kind has no status.
			Generation: true,
			Categories: []string{apiExtensions},
			Columns:    mutatingAdmissionPolicyColumns(c),
			Strategy:   admissionregistration.MutatingAdmissionPolicyStrategy(),
		},
		{
			GroupVersionResource: MutatingAdmissionPolicyBindings, Kind: "MutatingAdmissionPolicyBinding", Singular: "mutatingadmissionpolicybinding",
			// Kube keeps a generation for these, as for every kind with a spec.
			Generation: true,
			Categories: []string{apiExtensions},
			Columns:    mutatingAdmissionPolicyBindingColumns(c),
			Strategy:   admissionregistration.MutatingAdmissionPolicyBindingStrategy(),
		},
		{
			GroupVersionResource: APIServices, Kind: "APIService", Singular: "apiservice",
			Categories:   []string{apiExtensions},
			Subresources: resource.Subresources{Status: true},
			Columns:      apiServiceColumns(c),
			Strategy:     apiregistration.APIServiceStrategy(),
		},
	}
	for _, r := range rs {
		gvk := r.GroupVersionKind()
		if r.Objects, err = objects.NewTyped(scheme, gvk, r.ListKindName()); err != nil {
			return nil, fmt.Errorf("declare %s: %w", r.GroupVersionResource, err)
		}
		if r.Schema, err = builtin.Schema(gvk); err != nil {
			return nil, fmt.Errorf("declare %s: %w", r.GroupVersionResource, err)
		}
	}
	return rs, nil
}

// newScheme registers every API package core serves, in one scheme.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		coordinationv1.AddToScheme,
		eventsv1.AddToScheme,
		rbacv1.AddToScheme,
		admissionregistrationv1.AddToScheme,
		apiregistrationv1.AddToScheme,
		reviews.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return scheme, nil
}
