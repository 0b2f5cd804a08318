package validating

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/services/admission/internal/review"
)

type P = admissionregistrationv1.ValidatingAdmissionPolicy
type B = admissionregistrationv1.ValidatingAdmissionPolicyBinding

// want is what a write comes back with; message is the refusal's whole
// message, empty when the write is let through.
type want struct {
	message     string
	code        int32
	reason      metav1.StatusReason
	warnings    []string
	annotations map[string]string
}

func denied(policy, binding, message string) want {
	return want{
		message: deniedPrefix + fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", policy, binding, message),
		code:    422, reason: metav1.StatusReasonInvalid,
	}
}

func (w want) with(code int32, reason metav1.StatusReason) want {
	w.code, w.reason = code, reason
	return w
}

func check(t *testing.T, res *Result, err error, w want) {
	t.Helper()
	if w.message == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
	} else {
		st := status(t, err)
		if st.Message != w.message || st.Code != w.code || st.Reason != w.reason {
			t.Fatalf("refusal %d %s %q,\nwant %d %s %q", st.Code, st.Reason, st.Message, w.code, w.reason, w.message)
		}
		if len(st.Details.Causes) == 0 || !strings.HasSuffix(w.message, ": "+st.Details.Causes[len(st.Details.Causes)-1].Message) {
			t.Errorf("causes %+v lack the policy's message", st.Details.Causes)
		}
	}
	if res == nil {
		t.Fatal("no result")
	}
	if !reflect.DeepEqual(res.Warnings, w.warnings) {
		t.Errorf("warnings %q, want %q", res.Warnings, w.warnings)
	}
	if len(res.AuditAnnotations)+len(w.annotations) > 0 && !reflect.DeepEqual(res.AuditAnnotations, w.annotations) {
		t.Errorf("audit annotations %q, want %q", res.AuditAnnotations, w.annotations)
	}
}

func TestValidate(t *testing.T) {
	maxReplicas := "object.spec.replicas <= 5"
	ignore := func(p *P) { p.Spec.FailurePolicy = ptr(admissionregistrationv1.Ignore) }
	actions := func(a ...admissionregistrationv1.ValidationAction) func(*B) {
		return func(b *B) { b.Spec.ValidationActions = a }
	}
	withParams := func(kind schema.GroupVersionKind) func(*P) {
		return func(p *P) {
			p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: kind.GroupVersion().String(), Kind: kind.Kind}
		}
	}
	paramRef := func(r admissionregistrationv1.ParamRef) func(*B) { return func(b *B) { b.Spec.ParamRef = &r } }
	cmLimit := "object.spec.replicas <= int(params.data.max)"
	knownKinds := map[schema.GroupVersionKind]bool{configMapKind: true, limitKind: false}
	cms := &params{kinds: knownKinds, objects: []*unstructured.Unstructured{
		configMap("default", "limits", map[string]string{"tier": "a"}, map[string]any{"max": "5"}),
		configMap("default", "strict", map[string]string{"tier": "a"}, map[string]any{"max": "2"}),
		configMap("dev", "limits", nil, map[string]any{"max": "100"}),
	}}
	limits := &params{kinds: knownKinds, objects: []*unstructured.Unstructured{limit("cluster", 3)}}

	cases := []struct {
		name     string
		policies []*P
		bindings []*B
		params   Params
		attrs    *review.Attributes
		want     want
	}{
		{
			name:     "passing validation",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(3, nil),
		},
		{
			name:     "failed validation is denied with the expression",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5"),
		},
		{
			name: "message",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.Validations[0].Message = "  too many replicas "
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "too many replicas"),
		},
		{
			name: "messageExpression",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.Validations[0].Message = "static"
				p.Spec.Validations[0].MessageExpression = `"replicas " + string(object.spec.replicas) + " exceed 5 for " + request.userInfo.username`
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "replicas 9 exceed 5 for alice"),
		},
		{
			name: "messageExpression in error falls back to message",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.Validations[0].Message = "static"
				p.Spec.Validations[0].MessageExpression = `object.spec.missing`
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "static"),
		},
		{
			name: "reason Forbidden is a 403",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.Validations[0].Reason = ptr(metav1.StatusReasonForbidden)
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5").with(403, metav1.StatusReasonForbidden),
		},
		{
			name: "reason Unauthorized is a 401",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.Validations[0].Reason = ptr(metav1.StatusReasonUnauthorized)
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5").with(401, metav1.StatusReasonUnauthorized),
		},
		{
			name: "reason RequestEntityTooLarge is a 413",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.Validations[0].Reason = ptr(metav1.StatusReasonRequestEntityTooLarge)
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5").with(413, metav1.StatusReasonRequestEntityTooLarge),
		},
		{
			name:     "warn",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("max-b", "max", actions(admissionregistrationv1.Warn))},
			attrs:    createDeployment(9, nil),
			want:     want{warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'max' with binding 'max-b': failed expression: object.spec.replicas <= 5"}},
		},
		{
			name:     "audit",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("max-b", "max", actions(admissionregistrationv1.Warn, admissionregistrationv1.Audit))},
			attrs:    createDeployment(9, nil),
			want: want{
				warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'max' with binding 'max-b': failed expression: object.spec.replicas <= 5"},
				annotations: map[string]string{
					"validation.policy.admission.k8s.io/validation_failure": `[{"message":"failed expression: object.spec.replicas \u003c= 5","policy":"max","binding":"max-b","expressionIndex":0,"validationActions":["Warn","Audit"]}]`,
				},
			},
		},
		{
			name: "deny and audit keep the annotations with the refusal",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.Validations = append([]admissionregistrationv1.Validation{{Expression: "true"}}, p.Spec.Validations...)
				p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "replicas", ValueExpression: "string(object.spec.replicas)"}}
			})},
			bindings: []*B{binding("max-b", "max", actions(admissionregistrationv1.Deny, admissionregistrationv1.Audit))},
			attrs:    createDeployment(9, nil),
			want: func() want {
				w := denied("max", "max-b", "failed expression: object.spec.replicas <= 5")
				w.annotations = map[string]string{
					"max/replicas": "9",
					"validation.policy.admission.k8s.io/validation_failure": `[{"message":"failed expression: object.spec.replicas \u003c= 5","policy":"max","binding":"max-b","expressionIndex":1,"validationActions":["Deny","Audit"]}]`,
				}
				return w
			}(),
		},
		{
			name: "auditAnnotations of a passing write, null excluded",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{
					{Key: "user", ValueExpression: "request.userInfo.username"},
					{Key: "none", ValueExpression: "null"},
				}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(1, nil),
			want:     want{annotations: map[string]string{"max/user": "alice"}},
		},
		{
			name: "auditAnnotation values are cut at 10KiB",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "big", ValueExpression: "string(object.metadata.annotations.big)"}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs: func() *review.Attributes {
				a := createDeployment(1, nil)
				a.Object.SetAnnotations(map[string]string{"big": strings.Repeat("x", 11*1024)})
				return a
			}(),
			want: want{annotations: map[string]string{"max/big": strings.Repeat("x", 10*1024)}},
		},
		{
			name: "variables",
			policies: []*P{policy("max", "variables.big == false", func(p *P) {
				p.Spec.Variables = []admissionregistrationv1.Variable{
					{Name: "replicas", Expression: "object.spec.replicas"},
					{Name: "big", Expression: "variables.replicas > 5"},
				}
				p.Spec.Validations[0].MessageExpression = `"has " + string(variables.replicas)`
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(7, nil),
			want:     denied("max", "max-b", "has 7"),
		},
		{
			name:     "runtime error with failurePolicy Fail",
			policies: []*P{policy("max", "object.spec.missing > 1")},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(1, nil),
			want:     denied("max", "max-b", "expression 'object.spec.missing > 1' resulted in error: no such key: missing"),
		},
		{
			name:     "runtime error with failurePolicy Ignore",
			policies: []*P{policy("max", "object.spec.missing > 1", ignore)},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(1, nil),
		},
		{
			name:     "authorizer is never bound",
			policies: []*P{policy("authz", `authorizer.group("apps").resource("deployments").check("create").allowed()`)},
			bindings: []*B{binding("authz-b", "authz")},
			attrs:    createDeployment(1, nil),
			want:     denied("authz", "authz-b", "expression 'authorizer.group(\"apps\").resource(\"deployments\").check(\"create\").allowed()' resulted in error: no such attribute(s): authorizer"),
		},
		{
			name:     "compile error",
			policies: []*P{policy("max", "object.spec.replicas <")},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(1, nil),
			want:     denied("max", "max-b", "compilation error: compilation failed: ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | object.spec.replicas <\n | ......................^"),
		},
		{
			name: "matchConditions false skips the policy",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-alice", Expression: `request.userInfo.username != "alice"`}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
		},
		{
			name: "matchConditions true evaluates the policy",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "devs", Expression: `"devs" in request.userInfo.groups`}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5"),
		},
		{
			name: "matchConditions error with failurePolicy Fail",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "broken", Expression: `object.metadata.missing == "x"`}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(1, nil),
			want:     denied("max", "max-b", "expression 'object.metadata.missing == \"x\"' resulted in error: no such key: missing"),
		},
		{
			name: "matchConditions error with failurePolicy Ignore",
			policies: []*P{policy("max", maxReplicas, ignore, func(p *P) {
				p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "broken", Expression: `object.metadata.missing == "x"`}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
		},
		{
			name:     "policy without matchConstraints",
			policies: []*P{policy("max", maxReplicas, func(p *P) { p.Spec.MatchConstraints = nil })},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(1, nil),
			want:     want{message: deniedPrefix + "ValidatingAdmissionPolicy 'max' denied request: failed to configure policy: policy contained no match constraints, a required field", code: 422, reason: metav1.StatusReasonInvalid},
		},
		{
			name:     "policy without binding does nothing",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("other-b", "other")},
			attrs:    createDeployment(9, nil),
		},
		{
			name:     "the first refusal by name is reported",
			policies: []*P{policy("b-max", maxReplicas), policy("a-max", "object.spec.replicas <= 2")},
			bindings: []*B{binding("z", "b-max"), binding("y", "a-max"), binding("x", "a-max")},
			attrs:    createDeployment(9, nil),
			want:     denied("a-max", "x", "failed expression: object.spec.replicas <= 2"),
		},

		// Matching.
		{
			name:     "rules skip another operation",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("max-b", "max")},
			attrs:    write(admissionv1.Delete, deploymentKind, deploymentResource, "", nil, deployment("web", 9, nil)),
		},
		{
			name:     "a rule without subresource skips the status subresource",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("max-b", "max")},
			attrs:    write(admissionv1.Update, deploymentKind, deploymentResource, "status", deployment("web", 9, nil), deployment("web", 1, nil)),
		},
		{
			name: "*/status matches the status subresource",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{rule(allOps, []string{"*"}, []string{"*"}, []string{"*/status"})}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    write(admissionv1.Update, deploymentKind, deploymentResource, "status", deployment("web", 9, nil), deployment("web", 1, nil)),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5"),
		},
		{
			name: "* matches no subresource",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{rule(allOps, []string{"*"}, []string{"*"}, []string{"*"})}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    write(admissionv1.Update, deploymentKind, deploymentResource, "status", deployment("web", 9, nil), deployment("web", 1, nil)),
		},
		{
			name: "* matches any resource",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{rule(allOps, []string{"*"}, []string{"*"}, []string{"*"})}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5"),
		},
		{
			name: "excludeResourceRules",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				excluded := rule(allOps, []string{"apps"}, []string{"*"}, []string{"deployments"})
				excluded.ResourceNames = []string{"web"}
				p.Spec.MatchConstraints.ExcludeResourceRules = []admissionregistrationv1.NamedRuleWithOperations{excluded}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
		},
		{
			name: "resourceNames that do not name the object",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConstraints.ResourceRules[0].ResourceNames = []string{"api"}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
		},
		{
			name: "namespaceSelector matching",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5"),
		},
		{
			name:     "binding namespaceSelector not matching",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("max-b", "max", func(b *B) {
				b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}
			})},
			attrs: createDeployment(9, nil),
		},
		{
			name: "namespaceSelector on a missing namespace",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs: func() *review.Attributes {
				a := createDeployment(9, nil)
				a.Request.Namespace = "gone"
				return a
			}(),
			want: want{message: deniedPrefix + `ValidatingAdmissionPolicy 'max' denied request: failed to configure policy: namespaces "gone" not found`, code: 422, reason: metav1.StatusReasonInvalid},
		},
		{
			name: "namespaceSelector of a namespace being created reads its new labels",
			policies: []*P{policy("ns", "false", func(p *P) {
				p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{rule(allOps, []string{""}, []string{"v1"}, []string{"namespaces"})}
				p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "locked"}}
			})},
			bindings: []*B{binding("ns-b", "ns")},
			attrs:    createNamespace("new", map[string]string{"env": "locked"}),
			want:     want{message: `namespaces "new" is forbidden: ValidatingAdmissionPolicy 'ns' with binding 'ns-b' denied request: failed expression: false`, code: 422, reason: metav1.StatusReasonInvalid},
		},
		{
			name: "namespaceSelector of a namespace being created, not matching",
			policies: []*P{policy("ns", "false", func(p *P) {
				p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{rule(allOps, []string{""}, []string{"v1"}, []string{"namespaces"})}
				p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "locked"}}
			})},
			bindings: []*B{binding("ns-b", "ns")},
			attrs:    createNamespace("new", map[string]string{"env": "open"}),
		},
		{
			name: "namespaceObject",
			policies: []*P{policy("max", `namespaceObject.metadata.labels.env != "prod"`, func(p *P) {
				p.Spec.Validations[0].MessageExpression = `"not in " + namespaceObject.metadata.name`
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(1, nil),
			want:     denied("max", "max-b", "not in default"),
		},
		{
			name: "objectSelector on the new object",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, map[string]string{"app": "web"}),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= 5"),
		},
		{
			name: "objectSelector not matching",
			policies: []*P{policy("max", maxReplicas, func(p *P) {
				p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
			})},
			bindings: []*B{binding("max-b", "max")},
			attrs:    createDeployment(9, map[string]string{"app": "api"}),
		},
		{
			name:     "binding objectSelector on the old object",
			policies: []*P{policy("max", maxReplicas)},
			bindings: []*B{binding("max-b", "max", func(b *B) {
				b.Spec.MatchResources = &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
			})},
			attrs: write(admissionv1.Update, deploymentKind, deploymentResource, "", deployment("web", 9, nil), deployment("web", 1, map[string]string{"app": "web"})),
			want:  denied("max", "max-b", "failed expression: object.spec.replicas <= 5"),
		},

		// Params.
		{
			name:     "param by name in the request's namespace",
			policies: []*P{policy("max", cmLimit, withParams(configMapKind))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "limits"}))},
			params:   cms,
			attrs:    createDeployment(6, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= int(params.data.max)"),
		},
		{
			name:     "param by name in another namespace",
			policies: []*P{policy("max", cmLimit, withParams(configMapKind))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "limits", Namespace: "dev"}))},
			params:   cms,
			attrs:    createDeployment(6, nil),
		},
		{
			name: "params by selector, each evaluated",
			policies: []*P{policy("max", cmLimit, withParams(configMapKind), func(p *P) {
				p.Spec.Validations[0].MessageExpression = `"over " + params.metadata.name`
			})},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a"}}}))},
			params:   cms,
			attrs:    createDeployment(3, nil),
			want:     denied("max", "max-b", "over strict"),
		},
		{
			name:     "params by selector selecting none, allowed",
			policies: []*P{policy("max", "false", withParams(configMapKind))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "z"}}, ParameterNotFoundAction: ptr(admissionregistrationv1.AllowAction)}))},
			params:   cms,
			attrs:    createDeployment(3, nil),
		},
		{
			name:     "missing param, allowed",
			policies: []*P{policy("max", "false", withParams(configMapKind))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "gone", ParameterNotFoundAction: ptr(admissionregistrationv1.AllowAction)}))},
			params:   cms,
			attrs:    createDeployment(3, nil),
		},
		{
			name:     "missing param, denied",
			policies: []*P{policy("max", "true", withParams(configMapKind))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "gone", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}))},
			params:   cms,
			attrs:    createDeployment(3, nil),
			want:     denied("max", "max-b", "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
		},
		{
			name:     "missing param, denied, failurePolicy Ignore",
			policies: []*P{policy("max", "true", withParams(configMapKind), ignore)},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "gone", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}))},
			params:   cms,
			attrs:    createDeployment(3, nil),
		},
		{
			name:     "binding without paramRef evaluates with null params",
			policies: []*P{policy("max", "params == null", withParams(configMapKind))},
			bindings: []*B{binding("max-b", "max")},
			params:   cms,
			attrs:    createDeployment(3, nil),
		},
		{
			name:     "cluster-scoped param",
			policies: []*P{policy("max", "object.spec.replicas <= params.spec.max", withParams(limitKind))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "cluster"}))},
			params:   limits,
			attrs:    createDeployment(4, nil),
			want:     denied("max", "max-b", "failed expression: object.spec.replicas <= params.spec.max"),
		},
		{
			name:     "cluster-scoped param with a namespace",
			policies: []*P{policy("max", "true", withParams(limitKind))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "cluster", Namespace: "default"}))},
			params:   limits,
			attrs:    createDeployment(4, nil),
			want:     denied("max", "max-b", "failed to configure binding: paramRef.namespace must not be provided for a cluster-scoped `paramKind`"),
		},
		{
			name: "namespaced param for a cluster-scoped write",
			policies: []*P{policy("ns", "true", withParams(configMapKind), func(p *P) {
				p.Spec.MatchConstraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{rule(allOps, []string{""}, []string{"v1"}, []string{"namespaces"})}
			})},
			bindings: []*B{binding("ns-b", "ns", paramRef(admissionregistrationv1.ParamRef{Name: "limits"}))},
			params:   cms,
			attrs: func() *review.Attributes {
				a := createNamespace("new", nil)
				a.Request.Namespace = ""
				return a
			}(),
			want: want{message: `namespaces "new" is forbidden: ValidatingAdmissionPolicy 'ns' with binding 'ns-b' denied request: failed to configure binding: cannot use namespaced paramRef in policy binding that matches cluster-scoped resources`, code: 422, reason: metav1.StatusReasonInvalid},
		},
		{
			name:     "param kind unknown",
			policies: []*P{policy("max", "true", withParams(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gone"}))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "x"}))},
			params:   cms,
			attrs:    createDeployment(1, nil),
			want:     want{message: deniedPrefix + "ValidatingAdmissionPolicy 'max' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Gone'", code: 422, reason: metav1.StatusReasonInvalid},
		},
		{
			name:     "param kind not synced",
			policies: []*P{policy("max", "true", withParams(configMapKind))},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "limits"}))},
			params:   &params{kinds: knownKinds, err: fmt.Errorf("configmaps: %w", ErrNotSynced)},
			attrs:    createDeployment(1, nil),
			want:     denied("max", "max-b", "failed to configure binding: paramKind kind `&ParamKind{APIVersion:v1,Kind:ConfigMap,}` not yet synced to use for admission"),
		},
		{
			name:     "param kind not synced, failurePolicy Ignore",
			policies: []*P{policy("max", "false", withParams(configMapKind), ignore)},
			bindings: []*B{binding("max-b", "max", paramRef(admissionregistrationv1.ParamRef{Name: "limits"}))},
			params:   &params{kinds: knownKinds, err: fmt.Errorf("configmaps: %w", ErrNotSynced)},
			attrs:    createDeployment(1, nil),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newValidator(t, &store{policies: tc.policies, bindings: tc.bindings}, tc.params)
			res, err := v.Validate(context.Background(), tc.attrs)
			check(t, res, err, tc.want)
		})
	}
}

func createNamespace(name string, lbls map[string]string) *review.Attributes {
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	ns.SetLabels(lbls)
	a := write(admissionv1.Create, schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", ns, nil)
	// Kube gives a namespace's request its own name as namespace.
	a.Request.Namespace = name
	return a
}
