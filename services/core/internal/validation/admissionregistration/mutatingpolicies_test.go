package admissionregistration

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func mutatingPolicy() *admissionv1.MutatingAdmissionPolicy {
	return &admissionv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "labels.example.com"},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}},
			},
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
			Mutations: []admissionv1.Mutation{{
				PatchType:          admissionv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{labels: {"team": "a"}}}`},
			}},
		},
	}
}

func TestMutatingAdmissionPolicy(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*admissionv1.MutatingAdmissionPolicy)
		want   []string
	}{
		{name: "valid", mutate: func(*admissionv1.MutatingAdmissionPolicy) {}},
		{
			name: "valid with params, variables, conditions and a JSON patch",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) {
				p.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
				p.Spec.Variables = []admissionv1.Variable{{Name: "team", Expression: "params.data.team"}}
				p.Spec.MatchConditions = []admissionv1.MatchCondition{{Name: "unlabelled", Expression: `!has(object.metadata.labels) || !("team" in object.metadata.labels)`}}
				p.Spec.Mutations = append(p.Spec.Mutations, admissionv1.Mutation{
					PatchType: admissionv1.PatchTypeJSONPatch,
					JSONPatch: &admissionv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/data/team", value: variables.team}]`},
				})
				p.Spec.ReinvocationPolicy = admissionv1.IfNeededReinvocationPolicy
			},
		},
		{
			name: "failure policy",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) {
				p.Spec.FailurePolicy = ptr.To[admissionv1.FailurePolicyType]("Retry")
			},
			want: []string{`spec.failurePolicy: Unsupported value: "Retry": supported values: "Fail", "Ignore"`},
		},
		{
			name:   "no match constraints",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) { p.Spec.MatchConstraints = nil },
			want:   []string{"spec.matchConstraints: Required value"},
		},
		{
			name:   "no resource rules",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) { p.Spec.MatchConstraints.ResourceRules = nil },
			want:   []string{"spec.matchConstraints.resourceRules: Required value"},
		},
		{
			name: "delete cannot be mutated",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) {
				p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionv1.OperationType{admissionv1.Delete}
			},
			want: []string{`spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE"`},
		},
		{
			name:   "no mutations",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) { p.Spec.Mutations = nil },
			want:   []string{"spec.mutations: Required value: mutations must contain at least one item"},
		},
		{
			name:   "no reinvocation policy",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) { p.Spec.ReinvocationPolicy = "" },
			want:   []string{"spec.reinvocationPolicy: Required value"},
		},
		{
			name:   "unsupported reinvocation policy",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) { p.Spec.ReinvocationPolicy = "Always" },
			want:   []string{`spec.reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"`},
		},
		{
			name: "patch types",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) {
				p.Spec.Mutations = []admissionv1.Mutation{
					{},
					{PatchType: "StrategicMerge"},
					{PatchType: admissionv1.PatchTypeApplyConfiguration, JSONPatch: &admissionv1.JSONPatch{Expression: "[]"}},
					{PatchType: admissionv1.PatchTypeJSONPatch, ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: "Object{}"}},
					{PatchType: admissionv1.PatchTypeJSONPatch, JSONPatch: &admissionv1.JSONPatch{Expression: " "}},
				}
			},
			want: []string{
				"spec.mutations[0].patchType: Required value",
				`spec.mutations[1].patchType: Unsupported value: "StrategicMerge": supported values: "ApplyConfiguration", "JSONPatch"`,
				"spec.mutations[2].applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration",
				`spec.mutations[2].jsonPatch: Invalid value: "{jsonPatch}": must not be specified when patchType is ApplyConfiguration`,
				"spec.mutations[3].jsonPatch: Required value: must be specified when patchType is JSONPatch",
				`spec.mutations[3].applyConfiguration: Invalid value: "{applyConfiguration}": must not be specified when patchType is JSONPatch`,
				"spec.mutations[4].jsonPatch.expression: Required value",
			},
		},
		{
			name: "expressions that do not compile",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) {
				p.Spec.Mutations = []admissionv1.Mutation{
					{PatchType: admissionv1.PatchTypeApplyConfiguration, ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: "'not an object'"}},
					{PatchType: admissionv1.PatchTypeJSONPatch, JSONPatch: &admissionv1.JSONPatch{Expression: "'x'"}},
				}
			},
			want: []string{
				`spec.mutations[0].applyConfiguration.expression: Invalid value: "'not an object'": must evaluate to Object but got string`,
				`spec.mutations[1].jsonPatch.expression: Invalid value: "'x'": must evaluate to list(JSONPatch) but got string`,
			},
		},
		{
			name: "params without a param kind",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) {
				p.Spec.MatchConditions = []admissionv1.MatchCondition{{Name: "p", Expression: "params.data.x == 'y'"}}
				p.Spec.Variables = []admissionv1.Variable{{Name: "v", Expression: "params.data.x"}, {Name: "in", Expression: "1"}}
			},
			want: []string{
				"spec.matchConditions[0].expression: Invalid value: \"params.data.x == 'y'\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.data.x == 'y'\n | ^",
				"spec.variables[0].expression: Invalid value: \"params.data.x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.data.x\n | ^",
				`spec.variables[1].name: Invalid value: "in": name is not a valid CEL identifier`,
			},
		},
		{
			name: "match condition shape",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) {
				p.Spec.MatchConditions = []admissionv1.MatchCondition{{Name: "x", Expression: "true"}, {Name: "x"}}
			},
			want: []string{
				"spec.matchConditions[1].expression: Required value",
				`spec.matchConditions[1].name: Duplicate value: "x"`,
			},
		},
		{
			name: "param kind",
			mutate: func(p *admissionv1.MutatingAdmissionPolicy) {
				p.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "example.com/", Kind: "Limits"}
			},
			want: []string{`spec.paramKind.apiVersion: Invalid value: "example.com/": version must be specified`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mutatingPolicy()
			tt.mutate(p)
			checkCreate(t, MutatingAdmissionPolicyStrategy(), p, tt.want)
		})
	}
}

func TestMutatingAdmissionPolicyUpdate(t *testing.T) {
	// A stored match condition written under older rules: it uses params
	// although the policy has no param kind.
	stored := mutatingPolicy()
	stored.Spec.MatchConditions = []admissionv1.MatchCondition{{Name: "p", Expression: "params != null"}}
	changedMutations := stored.DeepCopy()
	changedMutations.Spec.Mutations[0].ApplyConfiguration.Expression = `Object{metadata: Object.metadata{labels: {"team": "b"}}}`
	changedConditions := stored.DeepCopy()
	changedConditions.Spec.MatchConditions[0].Expression = "params == null"
	tests := []struct {
		name     string
		obj, old *admissionv1.MutatingAdmissionPolicy
		want     []string
	}{
		{name: "unchanged conditions are not checked again", obj: changedMutations, old: stored},
		{name: "changed conditions are", obj: changedConditions, old: stored, want: []string{
			"spec.matchConditions[0].expression: Invalid value: \"params == null\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params == null\n | ^",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUpdate(t, MutatingAdmissionPolicyStrategy(), tt.obj.DeepCopy(), tt.old, tt.want)
		})
	}
}

func mutatingBinding() *admissionv1.MutatingAdmissionPolicyBinding {
	return &admissionv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "labels-binding"},
		Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "labels.example.com"},
	}
}

func TestMutatingAdmissionPolicyBinding(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*admissionv1.MutatingAdmissionPolicyBinding)
		want   []string
	}{
		{name: "valid", mutate: func(*admissionv1.MutatingAdmissionPolicyBinding) {}},
		{
			name:   "no policy name",
			mutate: func(b *admissionv1.MutatingAdmissionPolicyBinding) { b.Spec.PolicyName = "" },
			want:   []string{"spec.policyName: Required value"},
		},
		{
			name:   "policy name",
			mutate: func(b *admissionv1.MutatingAdmissionPolicyBinding) { b.Spec.PolicyName = "Bad_Name" },
			want:   []string{`spec.policyName: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name: "param ref",
			mutate: func(b *admissionv1.MutatingAdmissionPolicyBinding) {
				b.Spec.ParamRef = &admissionv1.ParamRef{}
			},
			want: []string{
				"spec.paramRef: Required value: one of name or selector must be specified",
				"spec.paramRef.parameterNotFoundAction: Required value",
			},
		},
		{
			name: "match resources",
			mutate: func(b *admissionv1.MutatingAdmissionPolicyBinding) {
				b.Spec.MatchResources = &admissionv1.MatchResources{
					ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Delete},
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
					}}},
				}
			},
			want: []string{`spec.matchResources.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mutatingBinding()
			tt.mutate(b)
			checkCreate(t, MutatingAdmissionPolicyBindingStrategy(), b, tt.want)
			checkUpdate(t, MutatingAdmissionPolicyBindingStrategy(), b, mutatingBinding(), tt.want)
		})
	}
}

func TestMutatingPolicyDefaults(t *testing.T) {
	p := mutatingPolicy()
	MutatingAdmissionPolicyStrategy().PrepareForCreate(context.Background(), p)
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Fail {
		t.Errorf("failurePolicy = %v, want Fail", p.Spec.FailurePolicy)
	}
	m := p.Spec.MatchConstraints
	if m.MatchPolicy == nil || *m.MatchPolicy != admissionv1.Equivalent || m.NamespaceSelector == nil || m.ObjectSelector == nil {
		t.Errorf("matchConstraints not defaulted: %+v", m)
	}
	if s := m.ResourceRules[0].Scope; s == nil || *s != admissionv1.AllScopes {
		t.Errorf("rule scope = %v, want *", s)
	}
	if p.Spec.ReinvocationPolicy != admissionv1.NeverReinvocationPolicy {
		t.Errorf("reinvocationPolicy changed to %q", p.Spec.ReinvocationPolicy)
	}
}
