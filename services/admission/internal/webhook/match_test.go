package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kplane.dev/services/admission/internal/review"
)

func TestMatch(t *testing.T) {
	s := startServer(t, allow)
	rule := func(ops []admissionregistrationv1.OperationType, groups, versions, resources []string, scope admissionregistrationv1.ScopeType) func(*admissionregistrationv1.ValidatingWebhook) {
		return func(w *admissionregistrationv1.ValidatingWebhook) {
			w.Rules = []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups: groups, APIVersions: versions, Resources: resources, Scope: &scope}}}
		}
	}
	all := []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	star := []string{"*"}
	core := []string{""}
	v1 := []string{"v1"}
	podStatus := func(a *review.Attributes) { a.Request.SubResource = "status"; a.Request.Operation = admissionv1.Update }
	namespace := func(labels map[string]string) func(*review.Attributes) {
		return func(a *review.Attributes) {
			a.Request.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}
			a.Request.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}
			// kube gives a namespace's request its own name as namespace.
			a.Request.Name, a.Request.Namespace = "new", "new"
			a.Object = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "new"}}}
			a.Object.SetLabels(labels)
		}
	}
	nsSelector := func(env string) func(*admissionregistrationv1.ValidatingWebhook) {
		return func(w *admissionregistrationv1.ValidatingWebhook) {
			w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}
		}
	}
	objSelector := func(w *admissionregistrationv1.ValidatingWebhook) {
		w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	for _, tc := range []struct {
		name    string
		webhook func(*admissionregistrationv1.ValidatingWebhook)
		request func(*review.Attributes)
		called  bool
	}{
		{name: "exact rule", webhook: rule(create, core, v1, []string{"pods"}, admissionregistrationv1.NamespacedScope), called: true},
		{name: "other operation", webhook: rule([]admissionregistrationv1.OperationType{admissionregistrationv1.Delete}, core, v1, []string{"pods"}, "*")},
		{name: "operation *", webhook: rule(all, core, v1, []string{"pods"}, "*"), called: true},
		{name: "other group", webhook: rule(all, []string{"apps"}, v1, []string{"pods"}, "*")},
		{name: "other version", webhook: rule(all, core, []string{"v2"}, []string{"pods"}, "*")},
		{name: "wildcards", webhook: rule(all, star, star, star, "*"), called: true},
		{name: "other resource", webhook: rule(all, core, v1, []string{"services"}, "*")},
		{name: "resource rule does not match its subresource", webhook: rule(all, core, v1, []string{"pods"}, "*"), request: podStatus},
		{name: "subresource rule", webhook: rule(all, core, v1, []string{"pods/status"}, "*"), request: podStatus, called: true},
		{name: "subresource rule does not match the resource", webhook: rule(all, core, v1, []string{"pods/status"}, "*")},
		{name: "*/* matches a subresource", webhook: rule(all, core, v1, []string{"*/*"}, "*"), request: podStatus, called: true},
		{name: "pods/* matches the resource", webhook: rule(all, core, v1, []string{"pods/*"}, "*"), called: true},
		{name: "cluster scope skips namespaced", webhook: rule(all, star, star, star, admissionregistrationv1.ClusterScope)},
		{name: "cluster scope matches a namespace", webhook: rule(all, star, star, star, admissionregistrationv1.ClusterScope), request: namespace(nil), called: true},
		{name: "namespaced scope skips a namespace", webhook: rule(all, star, star, star, admissionregistrationv1.NamespacedScope), request: namespace(nil)},
		{name: "namespace selector matches", webhook: nsSelector("prod"), called: true},
		{name: "namespace selector does not match", webhook: nsSelector("dev")},
		{name: "namespace selector on a namespace reads its new labels", webhook: func(w *admissionregistrationv1.ValidatingWebhook) {
			rule(all, core, v1, []string{"namespaces"}, "*")(w)
			nsSelector("dev")(w)
		}, request: namespace(map[string]string{"env": "dev"}), called: true},
		{name: "namespace selector on a namespace without the label", webhook: func(w *admissionregistrationv1.ValidatingWebhook) {
			rule(all, core, v1, []string{"namespaces"}, "*")(w)
			nsSelector("dev")(w)
		}, request: namespace(map[string]string{"env": "prod"})},
		{name: "object selector matches the object", webhook: objSelector, request: func(a *review.Attributes) { a.Object.SetLabels(map[string]string{"app": "web"}) }, called: true},
		{name: "object selector matches the old object", webhook: objSelector, request: func(a *review.Attributes) {
			a.Request.Operation = admissionv1.Update
			a.OldObject = pod(map[string]string{"app": "web"})
		}, called: true},
		{name: "object selector does not match", webhook: objSelector},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.calls()
			d := dispatcher(t, validatingConfigs(validating("match.example.com", s, tc.webhook)))
			a := createPod(pod(nil))
			if tc.request != nil {
				tc.request(a)
			}
			if _, err := d.Validate(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if called := s.calls() > before; called != tc.called {
				t.Errorf("webhook called: %v, want %v", called, tc.called)
			}
		})
	}
}

func TestNamespaceSelectorMissingNamespace(t *testing.T) {
	s := startServer(t, allow)
	d := dispatcher(t, validatingConfigs(validating("ns.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	})))
	a := createPod(pod(nil))
	a.Request.Namespace = "gone"
	_, err := d.Validate(context.Background(), a)
	if st := statusOf(t, err); st.Reason != metav1.StatusReasonNotFound || st.Message != `namespaces "gone" not found` {
		t.Errorf("status %+v, want namespace not found", st)
	}
}

func TestConfigurationsAreExempt(t *testing.T) {
	s := startServer(t, allow)
	d := dispatcher(t, validatingConfigs(validating("all.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
		w.Rules[0].APIGroups, w.Rules[0].APIVersions, w.Rules[0].Resources = []string{"*"}, []string{"*"}, []string{"*"}
	})))
	a := createPod(nil)
	a.Request.Kind = metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}
	a.Request.Resource = metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	a.Request.Namespace = ""
	if _, err := d.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if s.calls() != 0 {
		t.Error("a webhook configuration's write was sent to a webhook")
	}
	// The same webhook sees other kinds of the group.
	a.Request.Kind.Kind, a.Request.Resource.Resource = "Other", "others"
	if _, err := d.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if s.calls() != 1 {
		t.Errorf("the webhook was called %d times for another kind, want 1", s.calls())
	}
}

func TestMatchConditions(t *testing.T) {
	s := startServer(t, allow)
	for _, tc := range []struct {
		name       string
		conditions []admissionregistrationv1.MatchCondition
		policy     admissionregistrationv1.FailurePolicyType
		called     bool
		message    string
	}{
		{name: "all true", conditions: []admissionregistrationv1.MatchCondition{
			{Name: "alice", Expression: `request.userInfo.username == "alice"`},
			{Name: "web", Expression: `object.metadata.labels["app"] == "web"`},
		}, policy: admissionregistrationv1.Fail, called: true},
		{name: "one false", conditions: []admissionregistrationv1.MatchCondition{
			{Name: "alice", Expression: `request.userInfo.username == "alice"`},
			{Name: "bob", Expression: `request.userInfo.username == "bob"`},
		}, policy: admissionregistrationv1.Fail},
		{name: "error, Ignore", conditions: []admissionregistrationv1.MatchCondition{
			{Name: "missing", Expression: `object.metadata.labels["absent"] == "x"`},
		}, policy: admissionregistrationv1.Ignore},
		{name: "error, Fail", conditions: []admissionregistrationv1.MatchCondition{
			{Name: "missing", Expression: `object.metadata.labels["absent"] == "x"`},
		}, policy: admissionregistrationv1.Fail, message: `pods "p" is forbidden: expression 'object.metadata.labels["absent"] == "x"' resulted in error: no such key: absent`},
		{name: "false wins over an error", conditions: []admissionregistrationv1.MatchCondition{
			{Name: "missing", Expression: `object.metadata.labels["absent"] == "x"`},
			{Name: "bob", Expression: `request.userInfo.username == "bob"`},
		}, policy: admissionregistrationv1.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.calls()
			d := dispatcher(t, validatingConfigs(validating("cel.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.MatchConditions, w.FailurePolicy = tc.conditions, &tc.policy
			})))
			_, err := d.Validate(context.Background(), createPod(pod(map[string]string{"app": "web"})))
			if called := s.calls() > before; called != tc.called {
				t.Errorf("webhook called: %v, want %v", called, tc.called)
			}
			if tc.message == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if st := statusOf(t, err); st.Reason != metav1.StatusReasonForbidden || st.Message != tc.message {
				t.Errorf("status %s %q, want Forbidden %q", st.Reason, st.Message, tc.message)
			}
		})
	}
}
