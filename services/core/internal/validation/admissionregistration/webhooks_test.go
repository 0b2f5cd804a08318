package admissionregistration

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// messages renders errors as kubectl shows them in an Invalid status.
func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func checkCreate(t *testing.T, s resource.Strategy, obj runtime.Object, want []string) {
	t.Helper()
	ctx := context.Background()
	s.PrepareForCreate(ctx, obj)
	if diff := cmp.Diff(want, messages(s.Validate(ctx, obj))); diff != "" {
		t.Errorf("create errors (-want +got):\n%s", diff)
	}
}

func checkUpdate(t *testing.T, s resource.Strategy, obj, old runtime.Object, want []string) {
	t.Helper()
	ctx := context.Background()
	s.PrepareForUpdate(ctx, obj, old)
	if diff := cmp.Diff(want, messages(s.ValidateUpdate(ctx, obj, old))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
}

func validatingHook() admissionv1.ValidatingWebhook {
	return admissionv1.ValidatingWebhook{
		Name: "pods.policy.example.com",
		ClientConfig: admissionv1.WebhookClientConfig{
			Service: &admissionv1.ServiceReference{Namespace: "policy", Name: "webhook", Path: ptr.To("/validate")},
		},
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}},
		SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func validatingConfig(hooks ...admissionv1.ValidatingWebhook) *admissionv1.ValidatingWebhookConfiguration {
	return &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "policy"}, Webhooks: hooks}
}

func TestValidatingWebhookConfiguration(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*admissionv1.ValidatingWebhook)
		want   []string
	}{
		{name: "valid", mutate: func(*admissionv1.ValidatingWebhook) {}},
		{
			name:   "name missing",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.Name = "" },
			want:   []string{"webhooks[0].name: Required value"},
		},
		{
			name:   "name with two segments",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.Name = "example.com" },
			want:   []string{`webhooks[0].name: Invalid value: "example.com": should be a domain with at least three segments separated by dots`},
		},
		{
			name:   "name not a DNS subdomain",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.Name = "Pods.example.com" },
			want:   []string{`webhooks[0].name: Invalid value: "Pods.example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name:   "no client config",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.ClientConfig = admissionv1.WebhookClientConfig{} },
			want:   []string{"webhooks[0].clientConfig: Required value: exactly one of url or service is required"},
		},
		{
			name:   "url and service",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.ClientConfig.URL = ptr.To("https://example.com") },
			want:   []string{"webhooks[0].clientConfig: Required value: exactly one of url or service is required"},
		},
		{
			name: "url",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ClientConfig = admissionv1.WebhookClientConfig{URL: ptr.To("https://hooks.example.com:8443/validate")}
			},
		},
		{
			name: "url over http",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ClientConfig = admissionv1.WebhookClientConfig{URL: ptr.To("http://hooks.example.com/")}
			},
			want: []string{`webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]`},
		},
		{
			name: "url without host",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ClientConfig = admissionv1.WebhookClientConfig{URL: ptr.To("https:///validate")}
			},
			want: []string{`webhooks[0].clientConfig.url: Invalid value: "": host must be provided; desired format: https://host[/path]`},
		},
		{
			name: "url with user info",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ClientConfig = admissionv1.WebhookClientConfig{URL: ptr.To("https://bob:secret@hooks.example.com/")}
			},
			want: []string{`webhooks[0].clientConfig.url: Invalid value: "bob:secret": user information is not permitted in the URL`},
		},
		{
			name: "url with fragment",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ClientConfig = admissionv1.WebhookClientConfig{URL: ptr.To("https://hooks.example.com/#top")}
			},
			want: []string{`webhooks[0].clientConfig.url: Invalid value: "top": fragments are not permitted in the URL`},
		},
		{
			name: "url with query",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ClientConfig = admissionv1.WebhookClientConfig{URL: ptr.To("https://hooks.example.com/?a=b")}
			},
			want: []string{`webhooks[0].clientConfig.url: Invalid value: "a=b": query parameters are not permitted in the URL`},
		},
		{
			name: "url that does not parse",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ClientConfig = admissionv1.WebhookClientConfig{URL: ptr.To("https://hooks.example.com:port/")}
			},
			want: []string{`webhooks[0].clientConfig.url: Required value: url must be a valid URL: parse "https://hooks.example.com:port/": invalid port ":port" after host; desired format: https://host[/path]`},
		},
		{
			name: "service without name and namespace",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ClientConfig.Service.Name, h.ClientConfig.Service.Namespace = "", ""
			},
			want: []string{
				"webhooks[0].clientConfig.service.name: Required value: service name is required",
				"webhooks[0].clientConfig.service.namespace: Required value: service namespace is required",
			},
		},
		{
			name:   "service port out of range",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.ClientConfig.Service.Port = ptr.To[int32](70000) },
			want:   []string{"webhooks[0].clientConfig.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive"},
		},
		{
			name:   "service path without a leading slash",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.ClientConfig.Service.Path = ptr.To("validate") },
			want:   []string{`webhooks[0].clientConfig.service.path: Invalid value: "validate": must start with a '/'`},
		},
		{
			name:   "service path with an empty segment",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.ClientConfig.Service.Path = ptr.To("/a//b") },
			want:   []string{`webhooks[0].clientConfig.service.path: Invalid value: "/a//b": segment[1] may not be empty`},
		},
		{
			name:   "service path of two slashes",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.ClientConfig.Service.Path = ptr.To("//") },
			want:   []string{`webhooks[0].clientConfig.service.path: Invalid value: "//": segment[0] may not be empty`},
		},
		{
			name:   "service path segment not a DNS subdomain",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.ClientConfig.Service.Path = ptr.To("/Validate/") },
			want:   []string{`webhooks[0].clientConfig.service.path: Invalid value: "/Validate/": segment[0]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name:   "service path root",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.ClientConfig.Service.Path = ptr.To("/") },
		},
		{
			name:   "side effects missing",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.SideEffects = nil },
			want:   []string{"webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"},
		},
		{
			name:   "side effects Some",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.SideEffects = ptr.To(admissionv1.SideEffectClassSome) },
			want:   []string{`webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`},
		},
		{
			name: "side effects NoneOnDryRun",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.SideEffects = ptr.To(admissionv1.SideEffectClassNoneOnDryRun)
			},
		},
		{
			name: "failure policy",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.FailurePolicy = ptr.To[admissionv1.FailurePolicyType]("Retry")
			},
			want: []string{`webhooks[0].failurePolicy: Unsupported value: "Retry": supported values: "Fail", "Ignore"`},
		},
		{
			name:   "match policy",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.MatchPolicy = ptr.To[admissionv1.MatchPolicyType]("Fuzzy") },
			want:   []string{`webhooks[0].matchPolicy: Unsupported value: "Fuzzy": supported values: "Equivalent", "Exact"`},
		},
		{
			name:   "timeout zero",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.TimeoutSeconds = ptr.To[int32](0) },
			want:   []string{"webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds"},
		},
		{
			name:   "timeout too long",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.TimeoutSeconds = ptr.To[int32](31) },
			want:   []string{"webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"},
		},
		{
			name:   "timeout at the limit",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.TimeoutSeconds = ptr.To[int32](30) },
		},
		{
			name: "namespace selector operator",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists, Values: []string{"x"}}}}
			},
			want: []string{"webhooks[0].namespaceSelector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"},
		},
		{
			name: "object selector label value",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "-x"}}
			},
			want: []string{`webhooks[0].objectSelector.matchLabels: Invalid value: "-x": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		},
		{
			name:   "admission review versions missing",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.AdmissionReviewVersions = nil },
			want:   []string{"webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"},
		},
		{
			name:   "admission review versions unknown",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v2"} },
			want:   []string{`webhooks[0].admissionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1`},
		},
		{
			name:   "admission review versions with an unknown one",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v2", "v1beta1"} },
		},
		{
			name:   "admission review versions duplicate",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v1", "v1"} },
			want:   []string{`webhooks[0].admissionReviewVersions[1]: Invalid value: "v1": duplicate version`},
		},
		{
			name:   "admission review version not a DNS label",
			mutate: func(h *admissionv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v1", "V2"} },
			want:   []string{`webhooks[0].admissionReviewVersions[1]: Invalid value: "V2": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		},
		{
			name: "match conditions",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.MatchConditions = []admissionv1.MatchCondition{{Name: "not-system", Expression: "!request.userInfo.username.startsWith('system:')"}}
			},
		},
		{
			name: "match condition without name and expression",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.MatchConditions = []admissionv1.MatchCondition{{Expression: "  "}}
			},
			want: []string{
				"webhooks[0].matchConditions[0].expression: Required value",
				"webhooks[0].matchConditions[0].name: Required value",
			},
		},
		{
			name: "match condition name not qualified",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.MatchConditions = []admissionv1.MatchCondition{{Name: "not system", Expression: "true"}}
			},
			want: []string{`webhooks[0].matchConditions[0].name: Invalid value: "not system": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		},
		{
			name: "match condition names duplicate",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				h.MatchConditions = []admissionv1.MatchCondition{{Name: "a", Expression: "true"}, {Name: "a", Expression: "false"}}
			},
			want: []string{`webhooks[0].matchConditions[1].name: Duplicate value: "a"`},
		},
		{
			name: "too many match conditions",
			mutate: func(h *admissionv1.ValidatingWebhook) {
				for i := range 65 {
					h.MatchConditions = append(h.MatchConditions, admissionv1.MatchCondition{Name: fmt.Sprintf("c%d", i), Expression: "true"})
				}
			},
			want: []string{"webhooks[0].matchConditions: Too many: 65: must have at most 64 items"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := validatingHook()
			tt.mutate(&h)
			checkCreate(t, ValidatingWebhookConfigurationStrategy(), validatingConfig(h), tt.want)
		})
	}
}

func TestWebhookRules(t *testing.T) {
	rule := func(ops []admissionv1.OperationType, groups, versions, resources []string) admissionv1.RuleWithOperations {
		return admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources}}
	}
	all := []admissionv1.OperationType{admissionv1.OperationAll}
	tests := []struct {
		name string
		rule admissionv1.RuleWithOperations
		want []string
	}{
		{name: "wildcards", rule: rule(all, []string{"*"}, []string{"*"}, []string{"*/*"})},
		{name: "subresources", rule: rule(all, []string{""}, []string{"v1"}, []string{"pods", "pods/status", "*/scale"})},
		{
			name: "everything missing",
			rule: rule(nil, nil, nil, nil),
			want: []string{
				"webhooks[0].rules[0].operations: Required value",
				"webhooks[0].rules[0].apiGroups: Required value",
				"webhooks[0].rules[0].apiVersions: Required value",
				"webhooks[0].rules[0].resources: Required value",
			},
		},
		{
			name: "unknown operation",
			rule: rule([]admissionv1.OperationType{"PATCH"}, []string{""}, []string{"v1"}, []string{"pods"}),
			want: []string{`webhooks[0].rules[0].operations[0]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"`},
		},
		{
			name: "wildcard operation with others",
			rule: rule([]admissionv1.OperationType{"*", "CREATE"}, []string{""}, []string{"v1"}, []string{"pods"}),
			want: []string{`webhooks[0].rules[0].operations: Invalid value: ["*","CREATE"]: if '*' is present, must not specify other operations`},
		},
		{
			name: "wildcard group with others",
			rule: rule(all, []string{"*", "apps"}, []string{"v1"}, []string{"pods"}),
			want: []string{`webhooks[0].rules[0].apiGroups: Invalid value: ["*","apps"]: if '*' is present, must not specify other API groups`},
		},
		{
			name: "wildcard version with others",
			rule: rule(all, []string{""}, []string{"*", "v1"}, []string{"pods"}),
			want: []string{`webhooks[0].rules[0].apiVersions: Invalid value: ["*","v1"]: if '*' is present, must not specify other API versions`},
		},
		{
			name: "empty version",
			rule: rule(all, []string{""}, []string{"v1", ""}, []string{"pods"}),
			want: []string{"webhooks[0].rules[0].apiVersions[1]: Required value"},
		},
		{
			name: "empty resource",
			rule: rule(all, []string{""}, []string{"v1"}, []string{""}),
			want: []string{"webhooks[0].rules[0].resources[0]: Required value"},
		},
		{
			name: "all resources with others",
			rule: rule(all, []string{""}, []string{"v1"}, []string{"*/*", "pods"}),
			want: []string{`webhooks[0].rules[0].resources: Invalid value: ["*/*","pods"]: if '*/*' is present, must not specify other resources`},
		},
		{
			name: "wildcard with a plain resource",
			rule: rule(all, []string{""}, []string{"v1"}, []string{"*", "pods"}),
			want: []string{`webhooks[0].rules[0].resources: Invalid value: ["*","pods"]: if '*' is present, must not specify other resources without subresources`},
		},
		{
			name: "every subresource then one",
			rule: rule(all, []string{""}, []string{"v1"}, []string{"pods/*", "pods/status"}),
			want: []string{`webhooks[0].rules[0].resources[1]: Invalid value: "pods/status": if 'pods/*' is present, must not specify pods/status`},
		},
		{
			name: "every resource's subresource then one",
			rule: rule(all, []string{""}, []string{"v1"}, []string{"*/status", "pods/status"}),
			want: []string{`webhooks[0].rules[0].resources[1]: Invalid value: "pods/status": if '*/status' is present, must not specify pods/status`},
		},
		{
			name: "unknown scope",
			rule: func() admissionv1.RuleWithOperations {
				r := rule(all, []string{""}, []string{"v1"}, []string{"pods"})
				r.Scope = ptr.To[admissionv1.ScopeType]("Global")
				return r
			}(),
			want: []string{`webhooks[0].rules[0].scope: Unsupported value: "Global": supported values: "*", "Cluster", "Namespaced"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := validatingHook()
			h.Rules = []admissionv1.RuleWithOperations{tt.rule}
			checkCreate(t, ValidatingWebhookConfigurationStrategy(), validatingConfig(h), tt.want)
		})
	}
}

func TestWebhookNamesUnique(t *testing.T) {
	a, b := validatingHook(), validatingHook()
	checkCreate(t, ValidatingWebhookConfigurationStrategy(), validatingConfig(a, b), []string{`webhooks[1].name: Duplicate value: "pods.policy.example.com"`})

	m := mutatingConfig(mutatingHook(), mutatingHook())
	checkCreate(t, MutatingWebhookConfigurationStrategy(), m, []string{`webhooks[1].name: Duplicate value: "pods.mutate.example.com"`})
}

func mutatingHook() admissionv1.MutatingWebhook {
	return admissionv1.MutatingWebhook{
		Name:                    "pods.mutate.example.com",
		ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To("https://hooks.example.com/mutate")},
		SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1", "v1beta1"},
	}
}

func mutatingConfig(hooks ...admissionv1.MutatingWebhook) *admissionv1.MutatingWebhookConfiguration {
	return &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "mutate"}, Webhooks: hooks}
}

func TestMutatingWebhookConfiguration(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*admissionv1.MutatingWebhook)
		want   []string
	}{
		{name: "valid", mutate: func(*admissionv1.MutatingWebhook) {}},
		{
			name: "reinvocation policy",
			mutate: func(h *admissionv1.MutatingWebhook) {
				h.ReinvocationPolicy = ptr.To[admissionv1.ReinvocationPolicyType]("Always")
			},
			want: []string{`webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"`},
		},
		{
			name:   "side effects Unknown",
			mutate: func(h *admissionv1.MutatingWebhook) { h.SideEffects = ptr.To(admissionv1.SideEffectClassUnknown) },
			want:   []string{`webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"`},
		},
		{
			name: "errors in kube's order",
			mutate: func(h *admissionv1.MutatingWebhook) {
				h.Name = ""
				h.TimeoutSeconds = ptr.To[int32](60)
				h.ReinvocationPolicy = ptr.To[admissionv1.ReinvocationPolicyType]("Always")
				h.ClientConfig = admissionv1.WebhookClientConfig{}
				h.AdmissionReviewVersions = nil
			},
			want: []string{
				"webhooks[0].name: Required value",
				"webhooks[0].timeoutSeconds: Invalid value: 60: the timeout value must be between 1 and 30 seconds",
				`webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"`,
				"webhooks[0].clientConfig: Required value: exactly one of url or service is required",
				"webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mutatingHook()
			tt.mutate(&h)
			checkCreate(t, MutatingWebhookConfigurationStrategy(), mutatingConfig(h), tt.want)
		})
	}
}

// Updates keep objects stored under looser rules updatable: a rule that
// the stored object already broke is relaxed, one it kept is enforced.
func TestWebhookUpdateRelaxations(t *testing.T) {
	withSideEffects := func(c admissionv1.SideEffectClass) *admissionv1.ValidatingWebhookConfiguration {
		h := validatingHook()
		h.SideEffects = ptr.To(c)
		return validatingConfig(h)
	}
	withVersions := func(v ...string) *admissionv1.ValidatingWebhookConfiguration {
		h := validatingHook()
		h.AdmissionReviewVersions = v
		return validatingConfig(h)
	}
	withConditions := func(c ...admissionv1.MatchCondition) *admissionv1.ValidatingWebhookConfiguration {
		h := validatingHook()
		h.MatchConditions = c
		return validatingConfig(h)
	}
	// Only selector expressions are relaxed; matchLabels values are
	// always checked, in kube too.
	withLabelValue := func(v string) *admissionv1.ValidatingWebhookConfiguration {
		h := validatingHook()
		h.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{v}}}}
		return validatingConfig(h)
	}
	badCondition := admissionv1.MatchCondition{Name: "bad name", Expression: "true"}
	tests := []struct {
		name     string
		obj, old *admissionv1.ValidatingWebhookConfiguration
		want     []string
	}{
		{name: "side effects Some kept", obj: withSideEffects(admissionv1.SideEffectClassSome), old: withSideEffects(admissionv1.SideEffectClassSome)},
		{
			name: "side effects Some introduced",
			obj:  withSideEffects(admissionv1.SideEffectClassSome), old: withSideEffects(admissionv1.SideEffectClassNone),
			want: []string{`webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`},
		},
		{
			name: "side effects unknown class once relaxed",
			obj:  withSideEffects("Maybe"), old: withSideEffects(admissionv1.SideEffectClassUnknown),
			want: []string{`webhooks[0].sideEffects: Unsupported value: "Maybe": supported values: "None", "NoneOnDryRun", "Some", "Unknown"`},
		},
		{name: "unknown review versions kept", obj: withVersions("v2"), old: withVersions("v3")},
		{
			name: "unknown review versions introduced",
			obj:  withVersions("v2"), old: withVersions("v1"),
			want: []string{`webhooks[0].admissionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1`},
		},
		{name: "match conditions unchanged", obj: withConditions(badCondition), old: withConditions(badCondition)},
		{
			name: "match conditions changed",
			obj:  withConditions(badCondition), old: withConditions(),
			want: []string{`webhooks[0].matchConditions[0].name: Invalid value: "bad name": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		},
		{name: "invalid label value kept", obj: withLabelValue("-x"), old: withLabelValue("-y")},
		{
			name: "invalid label value introduced",
			obj:  withLabelValue("-x"), old: withLabelValue("x"),
			want: []string{`webhooks[0].objectSelector.matchExpressions[0].values[0]: Invalid value: "-x": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		},
		{name: "duplicate names kept", obj: validatingConfig(validatingHook(), validatingHook()), old: validatingConfig(validatingHook(), validatingHook())},
		{
			name: "duplicate names introduced",
			obj:  validatingConfig(validatingHook(), validatingHook()), old: validatingConfig(validatingHook()),
			want: []string{`webhooks[1].name: Duplicate value: "pods.policy.example.com"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUpdate(t, ValidatingWebhookConfigurationStrategy(), tt.obj, tt.old, tt.want)
		})
	}
}

func TestWebhookDefaults(t *testing.T) {
	t.Run("validating", func(t *testing.T) {
		c := validatingConfig(admissionv1.ValidatingWebhook{
			ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "s", Namespace: "n"}},
			Rules:        []admissionv1.RuleWithOperations{{}},
		})
		ValidatingWebhookConfigurationStrategy().PrepareForCreate(context.Background(), c)
		want := admissionv1.ValidatingWebhook{
			ClientConfig:      admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "s", Namespace: "n", Port: ptr.To[int32](443)}},
			Rules:             []admissionv1.RuleWithOperations{{Rule: admissionv1.Rule{Scope: ptr.To(admissionv1.AllScopes)}}},
			FailurePolicy:     ptr.To(admissionv1.Fail),
			MatchPolicy:       ptr.To(admissionv1.Equivalent),
			NamespaceSelector: &metav1.LabelSelector{},
			ObjectSelector:    &metav1.LabelSelector{},
			TimeoutSeconds:    ptr.To[int32](10),
		}
		if diff := cmp.Diff(want, c.Webhooks[0]); diff != "" {
			t.Errorf("defaults (-want +got):\n%s", diff)
		}
	})
	t.Run("mutating on update", func(t *testing.T) {
		c := mutatingConfig(admissionv1.MutatingWebhook{
			FailurePolicy: ptr.To(admissionv1.Ignore),
			ClientConfig:  admissionv1.WebhookClientConfig{URL: ptr.To("https://x.example.com")},
		})
		MutatingWebhookConfigurationStrategy().PrepareForUpdate(context.Background(), c, mutatingConfig())
		want := admissionv1.MutatingWebhook{
			ClientConfig:       admissionv1.WebhookClientConfig{URL: ptr.To("https://x.example.com")},
			FailurePolicy:      ptr.To(admissionv1.Ignore),
			MatchPolicy:        ptr.To(admissionv1.Equivalent),
			NamespaceSelector:  &metav1.LabelSelector{},
			ObjectSelector:     &metav1.LabelSelector{},
			TimeoutSeconds:     ptr.To[int32](10),
			ReinvocationPolicy: ptr.To(admissionv1.NeverReinvocationPolicy),
		}
		if diff := cmp.Diff(want, c.Webhooks[0]); diff != "" {
			t.Errorf("defaults (-want +got):\n%s", diff)
		}
	})
}

func TestNames(t *testing.T) {
	for _, s := range []resource.Strategy{
		MutatingWebhookConfigurationStrategy(), ValidatingWebhookConfigurationStrategy(),
		ValidatingAdmissionPolicyStrategy(), ValidatingAdmissionPolicyBindingStrategy(),
	} {
		v, ok := s.(rest.NameValidator)
		if !ok {
			t.Fatalf("%T does not validate names", s)
		}
		if errs := v.ValidateName("policy.example.com", false); len(errs) != 0 {
			t.Errorf("%T.ValidateName(policy.example.com) = %v, want none", s, errs)
		}
		if errs := v.ValidateName("Policy", false); len(errs) == 0 {
			t.Errorf("%T.ValidateName(Policy) accepted an upper case name", s)
		}
		if errs := v.ValidateName("policy-", true); len(errs) != 0 {
			t.Errorf("%T.ValidateName(policy-, prefix) = %v, want none", s, errs)
		}
	}
}
