package admissionregistration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func policy() *admissionv1.ValidatingAdmissionPolicy {
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "replicas.example.com"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}},
			},
			Validations: []admissionv1.Validation{{Expression: "object.spec.replicas <= 5"}},
		},
	}
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	var manyAnnotations []admissionv1.AuditAnnotation
	for i := range 21 {
		manyAnnotations = append(manyAnnotations, admissionv1.AuditAnnotation{Key: fmt.Sprintf("k%d", i), ValueExpression: "'v'"})
	}
	// The error carries the list as the value, rendered as JSON.
	raw, err := json.Marshal(manyAnnotations)
	if err != nil {
		t.Fatal(err)
	}
	manyAnnotationsJSON := string(raw)
	tests := []struct {
		name   string
		mutate func(*admissionv1.ValidatingAdmissionPolicy)
		want   []string
	}{
		{name: "valid", mutate: func(*admissionv1.ValidatingAdmissionPolicy) {}},
		{
			name: "failure policy",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.FailurePolicy = ptr.To[admissionv1.FailurePolicyType]("Retry")
			},
			want: []string{`spec.failurePolicy: Unsupported value: "Retry": supported values: "Fail", "Ignore"`},
		},
		{
			name:   "no match constraints",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) { p.Spec.MatchConstraints = nil },
			want:   []string{"spec.matchConstraints: Required value"},
		},
		{
			name:   "no resource rules",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) { p.Spec.MatchConstraints.ResourceRules = nil },
			want:   []string{"spec.matchConstraints.resourceRules: Required value"},
		},
		{
			name: "resource rule errors",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				r := &p.Spec.MatchConstraints.ResourceRules[0]
				r.ResourceNames = []string{"a", "a", "b/c"}
				r.Operations = nil
			},
			want: []string{
				`spec.matchConstraints.resourceRules[0].resourceNames[1]: Duplicate value: "a"`,
				`spec.matchConstraints.resourceRules[0].resourceNames[2]: Invalid value: "b/c": may not contain '/'`,
				"spec.matchConstraints.resourceRules[0].operations: Required value",
			},
		},
		{
			name: "exclude rule errors",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.MatchConstraints.ExcludeResourceRules = []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}},
				}}}
			},
			want: []string{"spec.matchConstraints.excludeResourceRules[0].resources: Required value"},
		},
		{
			name: "strict selectors",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn}}}
			},
			want: []string{"spec.matchConstraints.namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"},
		},
		{
			name: "match policy",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.MatchConstraints.MatchPolicy = ptr.To[admissionv1.MatchPolicyType]("Loose")
			},
			want: []string{`spec.matchConstraints.matchPolicy: Unsupported value: "Loose": supported values: "Equivalent", "Exact"`},
		},
		{
			name: "no validations or audit annotations",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.Validations = nil
			},
			want: []string{
				"spec.validations: Required value: validations or auditAnnotations must contain at least one item",
				"spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
			},
		},
		{
			name: "validation fields",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.Validations = []admissionv1.Validation{
					{Expression: " ", MessageExpression: "  ", Message: " ", Reason: ptr.To[metav1.StatusReason]("NotFound")},
					{Expression: "true", Message: "line\nbreak", Reason: ptr.To(metav1.StatusReasonForbidden)},
				}
			},
			want: []string{
				"spec.validations[0].expression: Required value: expression is not specified",
				`spec.validations[0].messageExpression: Invalid value: "  ": must be non-empty if specified`,
				`spec.validations[0].message: Invalid value: " ": message must be non-empty if specified`,
				`spec.validations[0].reason: Unsupported value: "NotFound": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge"`,
				`spec.validations[1].message: Invalid value: "line\nbreak": message must not contain line breaks`,
			},
		},
		{
			name: "param kind",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "example.com/v1", Kind: "ReplicaLimit"}
			},
		},
		{
			name: "param kind missing fields",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.ParamKind = &admissionv1.ParamKind{}
			},
			want: []string{"spec.paramKind.apiVersion: Required value", "spec.paramKind.kind: Required value"},
		},
		{
			name: "param kind bad api version",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "a/b/c", Kind: "Limit"}
			},
			want: []string{`spec.paramKind.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`},
		},
		{
			name: "param kind without version",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "example.com/", Kind: "Limit"}
			},
			want: []string{`spec.paramKind.apiVersion: Invalid value: "example.com/": version must be specified`},
		},
		{
			name: "param kind bad kind",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "v1", Kind: "Config_Map"}
			},
			want: []string{`spec.paramKind.kind: Invalid value: "Config_Map": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		},
		{
			name: "variables",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.Variables = []admissionv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}, {Name: "in", Expression: " "}, {Name: "1x", Expression: "1"}, {}}
			},
			want: []string{
				`spec.variables[1].name: Invalid value: "in": name is not a valid CEL identifier`,
				"spec.variables[1].expression: Required value: expression is not specified",
				`spec.variables[2].name: Invalid value: "1x": name is not a valid CEL identifier`,
				"spec.variables[3].name: Required value: name is not specified",
				"spec.variables[3].expression: Required value: expression is not specified",
			},
		},
		{
			name: "audit annotations",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.Validations = nil
				p.Spec.AuditAnnotations = []admissionv1.AuditAnnotation{
					{Key: "replicas", ValueExpression: "string(object.spec.replicas)"},
					{Key: "replicas", ValueExpression: " "},
					{Key: "bad key", ValueExpression: "'" + strings.Repeat("x", 5*1024) + "'"},
				}
			},
			want: []string{
				"spec.auditAnnotations[1].valueExpression: Required value: valueExpression is not specified",
				`spec.auditAnnotations[1].key: Duplicate value: "replicas"`,
				`spec.auditAnnotations[2].key: Invalid value: "replicas.example.com/bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				"spec.auditAnnotations[2].valueExpression: Required value: must not exceed 5120 bytes in length",
			},
		},
		{
			name: "too many audit annotations",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.AuditAnnotations = manyAnnotations
			},
			want: []string{"spec.auditAnnotations: Invalid value: " + manyAnnotationsJSON + ": must not have more than 20 auditAnnotations"},
		},
		{
			name: "match conditions",
			mutate: func(p *admissionv1.ValidatingAdmissionPolicy) {
				p.Spec.MatchConditions = []admissionv1.MatchCondition{{Name: "x", Expression: "true"}, {Name: "x"}}
			},
			want: []string{
				"spec.matchConditions[1].expression: Required value",
				`spec.matchConditions[1].name: Duplicate value: "x"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy()
			tt.mutate(p)
			checkCreate(t, ValidatingAdmissionPolicyStrategy(), p, tt.want)
		})
	}
}

func TestValidatingAdmissionPolicyUpdate(t *testing.T) {
	withCondition := func(name string) *admissionv1.ValidatingAdmissionPolicy {
		p := policy()
		p.Spec.MatchConditions = []admissionv1.MatchCondition{{Name: name, Expression: "true"}}
		return p
	}
	badName := `spec.matchConditions[0].name: Invalid value: "bad name": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
	withParams := withCondition("bad name")
	withParams.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	withWarning := func(w admissionv1.ExpressionWarning) *admissionv1.ValidatingAdmissionPolicy {
		p := policy()
		p.Status.TypeChecking = &admissionv1.TypeChecking{ExpressionWarnings: []admissionv1.ExpressionWarning{w}}
		return p
	}
	withCondStatus := func(c metav1.Condition) *admissionv1.ValidatingAdmissionPolicy {
		p := policy()
		p.Status.Conditions = []metav1.Condition{c}
		return p
	}
	tests := []struct {
		name     string
		obj, old *admissionv1.ValidatingAdmissionPolicy
		want     []string
	}{
		{name: "stored match conditions kept", obj: withCondition("bad name"), old: withCondition("bad name")},
		{name: "match conditions changed", obj: withCondition("bad name"), old: withCondition("good"), want: []string{badName}},
		{name: "param kind changed", obj: withParams, old: withCondition("bad name"), want: []string{badName}},
		{name: "type checking warning", obj: withWarning(admissionv1.ExpressionWarning{FieldRef: "spec.validations[0].expression", Warning: "no such field"}), old: policy()},
		{
			name: "type checking warning without text or field",
			obj:  withWarning(admissionv1.ExpressionWarning{}), old: policy(),
			want: []string{
				"status.typeChecking.expressionWarnings[0].warning: Required value",
				"status.typeChecking.expressionWarnings[0].fieldRef: Required value",
			},
		},
		{
			name: "type checking warning with a bad field ref",
			obj:  withWarning(admissionv1.ExpressionWarning{FieldRef: "spec[", Warning: "w"}), old: policy(),
			want: []string{`status.typeChecking.expressionWarnings[0].fieldRef: Invalid value: "spec[": invalid JSONPath: unterminated array`},
		},
		{
			name: "status condition",
			obj: withCondStatus(metav1.Condition{
				Type: "Ready", Status: metav1.ConditionTrue, Reason: "Checked",
				LastTransitionTime: metav1.Now(),
			}),
			old: policy(),
		},
		{
			name: "status condition status",
			obj: withCondStatus(metav1.Condition{
				Type: "Ready", Status: "Yes", Reason: "Checked",
				LastTransitionTime: metav1.Now(),
			}),
			old:  policy(),
			want: []string{`status.conditions[0].status: Unsupported value: "Yes": supported values: "False", "True", "Unknown"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUpdate(t, ValidatingAdmissionPolicyStrategy(), tt.obj, tt.old, tt.want)
		})
	}
}

func binding() *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "replicas-binding"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "replicas.example.com",
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

func TestValidatingAdmissionPolicyBinding(t *testing.T) {
	deny := ptr.To(admissionv1.DenyAction)
	tests := []struct {
		name   string
		mutate func(*admissionv1.ValidatingAdmissionPolicyBinding)
		want   []string
	}{
		{name: "valid", mutate: func(*admissionv1.ValidatingAdmissionPolicyBinding) {}},
		{
			name:   "policy name missing",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) { b.Spec.PolicyName = "" },
			want:   []string{"spec.policyName: Required value"},
		},
		{
			name:   "policy name not a DNS subdomain",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) { b.Spec.PolicyName = "Replicas" },
			want:   []string{`spec.policyName: Invalid value: "Replicas": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name:   "no validation actions",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) { b.Spec.ValidationActions = nil },
			want:   []string{"spec.validationActions: Required value: at least one validation action is required"},
		},
		{
			name: "warn and audit",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}
			},
		},
		{
			name: "deny and warn",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Deny, admissionv1.Warn}
			},
			want: []string{`spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)`},
		},
		{
			name: "unknown and duplicate actions",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ValidationActions = []admissionv1.ValidationAction{"Log", admissionv1.Audit, admissionv1.Audit}
			},
			want: []string{
				`spec.validationActions[0]: Unsupported value: "Log": supported values: "Audit", "Deny", "Warn"`,
				`spec.validationActions[2]: Duplicate value: "Audit"`,
			},
		},
		{
			name: "param ref by name",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ParamRef = &admissionv1.ParamRef{Name: "limits", Namespace: "default", ParameterNotFoundAction: deny}
			},
		},
		{
			name: "param ref by selector",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ParamRef = &admissionv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: ptr.To(admissionv1.AllowAction)}
			},
		},
		{
			name: "param ref with neither",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ParamRef = &admissionv1.ParamRef{}
			},
			want: []string{
				"spec.paramRef: Required value: one of name or selector must be specified",
				"spec.paramRef.parameterNotFoundAction: Required value",
			},
		},
		{
			name: "param ref with both",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ParamRef = &admissionv1.ParamRef{Name: "a/b", Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: deny}
			},
			want: []string{
				`spec.paramRef.name: Invalid value: "a/b": may not contain '/'`,
				"spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
				"spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
			},
		},
		{
			name: "param ref unknown action",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.ParamRef = &admissionv1.ParamRef{Name: "limits", ParameterNotFoundAction: ptr.To[admissionv1.ParameterNotFoundActionType]("Ignore")}
			},
			want: []string{`spec.paramRef.parameterNotFoundAction: Unsupported value: "Ignore": supported values: "Deny", "Allow"`},
		},
		{
			name: "match resources",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.MatchResources = &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					ResourceNames: []string{"special"},
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Update},
						Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					},
				}}}
			},
		},
		{
			name: "match resources errors",
			mutate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
				b.Spec.MatchResources = &admissionv1.MatchResources{ExcludeResourceRules: []admissionv1.NamedRuleWithOperations{{}}}
			},
			want: []string{
				"spec.matchResources.excludeResourceRules[0].operations: Required value",
				"spec.matchResources.excludeResourceRules[0].apiGroups: Required value",
				"spec.matchResources.excludeResourceRules[0].apiVersions: Required value",
				"spec.matchResources.excludeResourceRules[0].resources: Required value",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := binding()
			tt.mutate(b)
			checkCreate(t, ValidatingAdmissionPolicyBindingStrategy(), b, tt.want)
			checkUpdate(t, ValidatingAdmissionPolicyBindingStrategy(), b, binding(), tt.want)
		})
	}
}

func TestPolicyDefaults(t *testing.T) {
	t.Run("policy", func(t *testing.T) {
		p := policy()
		ValidatingAdmissionPolicyStrategy().PrepareForCreate(context.Background(), p)
		want := policy()
		want.Spec.FailurePolicy = ptr.To(admissionv1.Fail)
		want.Spec.MatchConstraints.MatchPolicy = ptr.To(admissionv1.Equivalent)
		want.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
		want.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{}
		want.Spec.MatchConstraints.ResourceRules[0].Scope = ptr.To(admissionv1.AllScopes)
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("defaults (-want +got):\n%s", diff)
		}
	})
	t.Run("binding", func(t *testing.T) {
		b := binding()
		b.Spec.MatchResources = &admissionv1.MatchResources{ExcludeResourceRules: []admissionv1.NamedRuleWithOperations{{}}}
		ValidatingAdmissionPolicyBindingStrategy().PrepareForUpdate(context.Background(), b, binding())
		m := b.Spec.MatchResources
		if *m.MatchPolicy != admissionv1.Equivalent || m.NamespaceSelector == nil || m.ObjectSelector == nil || *m.ExcludeResourceRules[0].Scope != admissionv1.AllScopes {
			t.Errorf("match resources not defaulted: %+v", m)
		}
		if b.Spec.ParamRef != nil {
			t.Errorf("paramRef = %+v, want none: v1 does not default it", b.Spec.ParamRef)
		}
	})
}
