package kinds

import (
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/libs/apiserver/eventconv"
	"kplane.dev/libs/apiserver/resource"
)

var (
	now     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	created = metav1.NewTime(now.Add(-5 * time.Minute))
)

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: created}
}

func TestColumns(t *testing.T) {
	c := clocktesting.NewFakePassiveClock(now)
	rs, err := Resources(c)
	if err != nil {
		t.Fatal(err)
	}
	byGVR := map[string][]string{}
	for _, r := range rs {
		var names []string
		if !r.ColumnsIncludeName {
			names = append(names, "Name")
		}
		for _, col := range r.Columns {
			names = append(names, col.Name)
		}
		byGVR[r.GroupVersionResource.String()] = names
	}
	coreEvent := &corev1.Event{
		ObjectMeta:     meta("e1"),
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", FieldPath: "spec.containers{c}"},
		Reason:         "Pulled", Message: "  pulled image \n", Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(now.Add(-time.Hour)), LastTimestamp: metav1.NewTime(now.Add(-2 * time.Minute)), Count: 7,
	}
	seriesEvent := &corev1.Event{
		ObjectMeta:     meta("e2"),
		InvolvedObject: corev1.ObjectReference{Kind: "Node"},
		Reason:         "Rebooted", Type: corev1.EventTypeWarning,
		EventTime:           metav1.NewMicroTime(now.Add(-3 * time.Hour)),
		Series:              &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(now.Add(-10 * time.Second))},
		ReportingController: "example.com/ctl", ReportingInstance: "ctl-1",
	}
	for _, tc := range []struct {
		name    string
		gvr     string
		obj     runtime.Object
		columns []string
		cells   []any
	}{
		{"namespace", "/v1, Resource=namespaces", &corev1.Namespace{ObjectMeta: meta("n"), Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			[]string{"Name", "Status", "Age"}, []any{"Active", "5m"}},
		{"configmap", "/v1, Resource=configmaps", &corev1.ConfigMap{ObjectMeta: meta("c"), Data: map[string]string{"a": ""}, BinaryData: map[string][]byte{"b": nil}},
			[]string{"Name", "Data", "Age"}, []any{int64(2), "5m"}},
		{"secret", "/v1, Resource=secrets", &corev1.Secret{ObjectMeta: meta("s"), Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}},
			[]string{"Name", "Type", "Data", "Age"}, []any{"kubernetes.io/tls", int64(2), "5m"}},
		{"serviceaccount", "/v1, Resource=serviceaccounts", &corev1.ServiceAccount{ObjectMeta: meta("sa"), Secrets: []corev1.ObjectReference{{Name: "x"}}},
			[]string{"Name", "Secrets", "Age"}, []any{int64(1), "5m"}},
		{"core event", "/v1, Resource=events", coreEvent,
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"2m", "Normal", "Pulled", "pod/p", "spec.containers{c}", "kubelet, node-1", "pulled image", "60m", int64(7), "e1"}},
		{"core event of the new API", "/v1, Resource=events", seriesEvent,
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"10s", "Warning", "Rebooted", "node", "", "example.com/ctl, ctl-1", "", "3h", int64(4), "e2"}},
		{"events.k8s.io event", "events.k8s.io/v1, Resource=events", eventconv.FromCore(coreEvent),
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"2m", "Normal", "Pulled", "pod/p", "spec.containers{c}", "kubelet, node-1", "pulled image", "60m", int64(7), "e1"}},
		{"events.k8s.io singleton", "events.k8s.io/v1, Resource=events", eventconv.FromCore(&corev1.Event{ObjectMeta: meta("e3"), EventTime: metav1.NewMicroTime(now.Add(-time.Minute))}),
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"60s", "", "", "", "", "", "", "60s", int64(1), "e3"}},
		{"legacy event without times", "/v1, Resource=events", &corev1.Event{ObjectMeta: meta("e4")},
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			[]any{"<unknown>", "", "", "", "", "", "", "<unknown>", int64(1), "e4"}},
		{"lease", "coordination.k8s.io/v1, Resource=leases", &coordinationv1.Lease{ObjectMeta: meta("l"), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("me")}},
			[]string{"Name", "Holder", "Age"}, []any{"me", "5m"}},
		{"lease without holder", "coordination.k8s.io/v1, Resource=leases", &coordinationv1.Lease{ObjectMeta: meta("l")},
			[]string{"Name", "Holder", "Age"}, []any{"", "5m"}},
		{"role", "rbac.authorization.k8s.io/v1, Resource=roles", &rbacv1.Role{ObjectMeta: meta("r")},
			[]string{"Name", "Created At"}, []any{"2026-01-02T02:59:05Z"}},
		{"clusterrole", "rbac.authorization.k8s.io/v1, Resource=clusterroles", &rbacv1.ClusterRole{ObjectMeta: meta("cr")},
			[]string{"Name", "Created At"}, []any{"2026-01-02T02:59:05Z"}},
		{"rolebinding", "rbac.authorization.k8s.io/v1, Resource=rolebindings", &rbacv1.RoleBinding{
			ObjectMeta: meta("rb"), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"}, {Kind: "Group", Name: "devs"}, {Kind: "ServiceAccount", Namespace: "ns", Name: "sa"}},
		}, []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}, []any{"Role/r", "5m", "alice, bob", "devs", "ns/sa"}},
		{"clusterrolebinding", "rbac.authorization.k8s.io/v1, Resource=clusterrolebindings", &rbacv1.ClusterRoleBinding{ObjectMeta: meta("crb"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cr"}},
			[]string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}, []any{"ClusterRole/cr", "5m", "", "", ""}},
		{"mutating webhooks", "admissionregistration.k8s.io/v1, Resource=mutatingwebhookconfigurations", &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta("m"), Webhooks: make([]admissionregistrationv1.MutatingWebhook, 2)},
			[]string{"Name", "Webhooks", "Age"}, []any{int64(2), "5m"}},
		{"validating webhooks", "admissionregistration.k8s.io/v1, Resource=validatingwebhookconfigurations", &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta("v")},
			[]string{"Name", "Webhooks", "Age"}, []any{int64(0), "5m"}},
		{"policy", "admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicies", &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: meta("p"), Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			Validations: make([]admissionregistrationv1.Validation, 3), ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
		}}, []string{"Name", "Validations", "ParamKind", "Age"}, []any{int64(3), "v1/ConfigMap", "5m"}},
		{"policy without params", "admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicies", &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: meta("p")},
			[]string{"Name", "Validations", "ParamKind", "Age"}, []any{int64(0), "<unset>", "5m"}},
		{"binding", "admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicybindings", &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("b"), Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "p", ParamRef: &admissionregistrationv1.ParamRef{Namespace: "ns", Name: "cm"},
		}}, []string{"Name", "PolicyName", "ParamRef", "Age"}, []any{"p", "ns/cm", "5m"}},
		{"binding to a param in any namespace", "admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicybindings", &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("b"), Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "p", ParamRef: &admissionregistrationv1.ParamRef{Name: "cm"},
		}}, []string{"Name", "PolicyName", "ParamRef", "Age"}, []any{"p", "*/cm", "5m"}},
		{"binding without params", "admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicybindings", &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("b")},
			[]string{"Name", "PolicyName", "ParamRef", "Age"}, []any{"", "<unset>", "5m"}},
		{"mutating policy", "admissionregistration.k8s.io/v1, Resource=mutatingadmissionpolicies", &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: meta("mp"), Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			Mutations: make([]admissionregistrationv1.Mutation, 2), ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Limits"},
		}}, []string{"Name", "Mutations", "ParamKind", "Age"}, []any{int64(2), "example.com/v1/Limits", "5m"}},
		{"mutating policy without params", "admissionregistration.k8s.io/v1, Resource=mutatingadmissionpolicies", &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: meta("mp")},
			[]string{"Name", "Mutations", "ParamKind", "Age"}, []any{int64(0), "<unset>", "5m"}},
		{"mutating binding", "admissionregistration.k8s.io/v1, Resource=mutatingadmissionpolicybindings", &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: meta("mb"), Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: "mp", ParamRef: &admissionregistrationv1.ParamRef{Namespace: "ns", Name: "limits"},
		}}, []string{"Name", "PolicyName", "ParamRef", "Age"}, []any{"mp", "ns/limits", "5m"}},
		{"local apiservice", "apiregistration.k8s.io/v1, Resource=apiservices", &apiregistrationv1.APIService{ObjectMeta: meta("v1.")},
			[]string{"Name", "Service", "Available", "Age"}, []any{"Local", "Unknown", "5m"}},
		{"available apiservice", "apiregistration.k8s.io/v1, Resource=apiservices", &apiregistrationv1.APIService{
			ObjectMeta: meta("v1.example.com"), Spec: apiregistrationv1.APIServiceSpec{Service: &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}},
			Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue, Reason: "Passed"}}},
		}, []string{"Name", "Service", "Available", "Age"}, []any{"ns/svc", "True", "5m"}},
		{"unavailable apiservice", "apiregistration.k8s.io/v1, Resource=apiservices", &apiregistrationv1.APIService{
			ObjectMeta: meta("v1.example.com"),
			Status:     apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse, Reason: "ServiceNotFound"}}},
		}, []string{"Name", "Service", "Available", "Age"}, []any{"Local", "False (ServiceNotFound)", "5m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := byGVR[tc.gvr]; !equality.Semantic.DeepEqual(got, tc.columns) {
				t.Fatalf("columns of %s = %q, want %q", tc.gvr, got, tc.columns)
			}
			var r = findResource(t, rs, tc.gvr)
			cells := make([]any, 0, len(r.Columns))
			for _, col := range r.Columns {
				v, err := col.Cell.Value(tc.obj)
				if err != nil {
					t.Fatalf("column %s: %v", col.Name, err)
				}
				cells = append(cells, v)
			}
			if !equality.Semantic.DeepEqual(cells, tc.cells) {
				t.Fatalf("cells = %#v\nwant %#v", cells, tc.cells)
			}
		})
	}
}

func findResource(t *testing.T, rs []*resource.Resource, gvr string) *resource.Resource {
	t.Helper()
	for _, r := range rs {
		if r.GroupVersionResource.String() == gvr {
			return r
		}
	}
	t.Fatalf("no resource %s", gvr)
	return nil
}

func ptr[T any](v T) *T { return &v }
