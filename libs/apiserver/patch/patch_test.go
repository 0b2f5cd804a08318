package patch_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"kplane.dev/libs/apiserver/patch"
)

func TestPatchConfigMap(t *testing.T) {
	p := newPatcher(t, configMaps(t))
	cases := []struct {
		name      string
		patchType types.PatchType
		body      string
		wantData  map[string]string
		wantLabel map[string]string
	}{
		{
			name:      "json patch adds a key",
			patchType: types.JSONPatchType,
			body:      `[{"op":"add","path":"/data/other","value":"x"},{"op":"test","path":"/data/key","value":"value"}]`,
			wantData:  map[string]string{"key": "value", "other": "x"},
			wantLabel: map[string]string{"app": "web"},
		},
		{
			name:      "merge patch replaces and deletes",
			patchType: types.MergePatchType,
			body:      `{"data":{"key":null,"new":"n"},"metadata":{"labels":{"tier":"front"}}}`,
			wantData:  map[string]string{"new": "n"},
			wantLabel: map[string]string{"app": "web", "tier": "front"},
		},
		{
			name:      "strategic merge patch with $patch delete",
			patchType: types.StrategicMergePatchType,
			body:      `{"data":{"more":"m"},"metadata":{"labels":{"$patch":"replace","only":"this"}}}`,
			wantData:  map[string]string{"key": "value", "more": "m"},
			wantLabel: map[string]string{"only": "this"},
		},
		{
			name:      "apply takes the fields it names",
			patchType: types.ApplyYAMLPatchType,
			body:      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\ndata:\n  applied: yes-string\n",
			wantData:  map[string]string{"key": "value", "applied": "yes-string"},
			wantLabel: map[string]string{"app": "web"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := doPatch(p, storedConfigMap(t, p), tc.patchType, []byte(tc.body), cmOpts)
			if err != nil {
				t.Fatalf("Patch: %v", err)
			}
			cm := out.(*corev1.ConfigMap)
			if !reflect.DeepEqual(cm.Data, tc.wantData) {
				t.Errorf("data = %v, want %v", cm.Data, tc.wantData)
			}
			if !reflect.DeepEqual(cm.Labels, tc.wantLabel) {
				t.Errorf("labels = %v, want %v", cm.Labels, tc.wantLabel)
			}
			if cm.UID != "uid-a" || cm.ResourceVersion != "5" {
				t.Errorf("uid, resourceVersion = %q, %q; the patch must keep them", cm.UID, cm.ResourceVersion)
			}
			wantOp := metav1.ManagedFieldsOperationUpdate
			if tc.patchType == types.ApplyYAMLPatchType {
				wantOp = metav1.ManagedFieldsOperationApply
			}
			if e := entry(cm.ManagedFields, "tester", wantOp, ""); e == nil {
				t.Errorf("managedFields %s has no %s entry for tester", managers(cm.ManagedFields), wantOp)
			}
		})
	}
}

func TestPatchWidget(t *testing.T) {
	p := newPatcher(t, widgets())
	cases := []struct {
		name      string
		patchType types.PatchType
		body      string
		want      map[string]any
	}{
		{
			name:      "json patch",
			patchType: types.JSONPatchType,
			body:      `[{"op":"replace","path":"/spec/size","value":4}]`,
			want:      map[string]any{"size": int64(4), "color": "red"},
		},
		{
			name:      "merge patch",
			patchType: types.MergePatchType,
			body:      `{"spec":{"color":null,"shape":"round"}}`,
			want:      map[string]any{"size": int64(3), "shape": "round"},
		},
		{
			name:      "apply merges into a schemaless kind",
			patchType: types.ApplyYAMLPatchType,
			body:      "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  shape: round\n",
			want:      map[string]any{"size": int64(3), "color": "red", "shape": "round"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := doPatch(p, storedWidget(t, p), tc.patchType, []byte(tc.body), widgetOpts)
			if err != nil {
				t.Fatalf("Patch: %v", err)
			}
			u := out.(*unstructured.Unstructured)
			spec, _, _ := unstructured.NestedMap(u.Object, "spec")
			if !reflect.DeepEqual(spec, tc.want) {
				t.Errorf("spec = %#v, want %#v", spec, tc.want)
			}
			if u.GetNamespace() != "ns" || u.GetUID() != "uid-w" {
				t.Errorf("namespace, uid = %q, %q; want ns, uid-w", u.GetNamespace(), u.GetUID())
			}
		})
	}
}

// statusError is what a test expects of a failed patch: the HTTP code,
// the reason and a piece of the message, as kube-apiserver returns them.
type statusError struct {
	code    int32
	reason  metav1.StatusReason
	message string
}

func checkStatus(t *testing.T, err error, want statusError) {
	t.Helper()
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("err = %v (%T), want an API status error", err, err)
	}
	s := status.Status()
	if s.Code != want.code || s.Reason != want.reason || !strings.Contains(s.Message, want.message) {
		t.Fatalf("status = %d %s %q\nwant     %d %s containing %q", s.Code, s.Reason, s.Message, want.code, want.reason, want.message)
	}
}

func TestPatchErrors(t *testing.T) {
	cms := newPatcher(t, configMaps(t))
	ws := newPatcher(t, widgets())
	// Sixteen copies of data into itself would double it sixteen times:
	// 32 MiB from a patch of under 2 KiB.
	doubling := []string{fmt.Sprintf(`{"op":"add","path":"/data/pad","value":%q}`, strings.Repeat("p", 512))}
	for i := range 16 {
		doubling = append(doubling, fmt.Sprintf(`{"op":"copy","from":"/data","path":"/data/b%d"}`, i))
	}
	amplifying := "[" + strings.Join(doubling, ",") + "]"
	huge := fmt.Sprintf(`{"data":{"big":%q}}`, strings.Repeat("x", 3<<20))
	hugeAdd := fmt.Sprintf(`[{"op":"add","path":"/data/big","value":%q}]`, strings.Repeat("x", 3<<20))
	manyOps := "[" + strings.Repeat(`{"op":"test","path":"/data/key","value":"value"},`, 10000) + `{"op":"test","path":"/data/key","value":"value"}]`
	type target struct {
		p       *patch.Patcher
		current func(testing.TB, *patch.Patcher) runtime.Object
		opts    patch.Options
	}
	cm := target{cms, func(tb testing.TB, p *patch.Patcher) runtime.Object { return storedConfigMap(tb, p) }, cmOpts}
	missingCM := target{cms, func(testing.TB, *patch.Patcher) runtime.Object { return nil }, cmOpts}
	widget := target{ws, func(tb testing.TB, p *patch.Patcher) runtime.Object { return storedWidget(tb, p) }, widgetOpts}
	with := func(tg target, edit func(*patch.Options)) target {
		edit(&tg.opts)
		return tg
	}
	cases := []struct {
		name      string
		target    target
		patchType types.PatchType
		body      string
		want      statusError
	}{
		{"strategic merge patch on a custom resource", widget, types.StrategicMergePatchType, `{}`,
			statusError{415, metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"}},
		{"unknown patch type", cm, "application/json", `{}`,
			statusError{415, metav1.StatusReasonUnsupportedMediaType, "accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"}},
		{"apply without fieldManager", with(cm, func(o *patch.Options) { o.FieldManager = "" }), types.ApplyYAMLPatchType, "{}",
			statusError{422, metav1.StatusReasonInvalid, `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`}},
		{"force on a merge patch", with(cm, func(o *patch.Options) { o.Force = true }), types.MergePatchType, "{}",
			statusError{422, metav1.StatusReasonInvalid, "force: Forbidden: may not be specified for non-apply patch"}},
		{"unknown fieldValidation", with(cm, func(o *patch.Options) { o.FieldValidation = "Loud" }), types.MergePatchType, "{}",
			statusError{422, metav1.StatusReasonInvalid, "fieldValidation: Unsupported value"}},
		{"body is not JSON", cm, types.MergePatchType, `{"data":`,
			statusError{400, metav1.StatusReasonBadRequest, "invalid JSON patch"}},
		{"json patch is not a list", cm, types.JSONPatchType, `{"op":"add"}`,
			statusError{400, metav1.StatusReasonBadRequest, "json: cannot unmarshal object"}},
		{"json patch test fails", cm, types.JSONPatchType, `[{"op":"test","path":"/data/key","value":"other"}]`,
			statusError{422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request"}},
		{"json patch removes a missing key", cm, types.JSONPatchType, `[{"op":"remove","path":"/data/nope"}]`,
			statusError{422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request"}},
		{"json patch replaces the whole object with nothing", cm, types.JSONPatchType, `[{"op":"replace","path":""}]`,
			statusError{422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request"}},
		{"json patch over the operation limit", cm, types.JSONPatchType, manyOps,
			statusError{413, metav1.StatusReasonRequestEntityTooLarge, "The allowed maximum operations in a JSON patch is 10000, got 10001"}},
		{"json patch whose copies double the object", cm, types.JSONPatchType, amplifying,
			statusError{422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request"}},
		{"json patch making an object over the request limit", cm, types.JSONPatchType, hugeAdd,
			statusError{413, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 3145728"}},
		{"merge patch making an object over the request limit", cm, types.MergePatchType, huge,
			statusError{413, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 3145728"}},
		{"json patch renames the object", cm, types.JSONPatchType, `[{"op":"replace","path":"/metadata/name","value":"b"}]`,
			statusError{400, metav1.StatusReasonBadRequest, "the name of the object (b) does not match the name on the URL (a)"}},
		{"merge patch moves the namespace", cm, types.MergePatchType, `{"metadata":{"namespace":"other"}}`,
			statusError{400, metav1.StatusReasonBadRequest, "the namespace of the provided object does not match the namespace sent on the request"}},
		{"json patch changes the kind", cm, types.JSONPatchType, `[{"op":"replace","path":"/kind","value":"Pod"}]`,
			statusError{422, metav1.StatusReasonInvalid, "unable to decode /v1, Kind=Pod into *v1.ConfigMap"}},
		{"merge patch changes the apiVersion of a custom resource", widget, types.MergePatchType, `{"apiVersion":"example.com/v2"}`,
			statusError{422, metav1.StatusReasonInvalid, "unable to decode example.com/v2, Kind=Widget into *unstructured.Unstructured"}},
		{"merge patch removes the kind of a custom resource", widget, types.MergePatchType, `{"kind":null}`,
			statusError{422, metav1.StatusReasonInvalid, "unable to decode example.com/v1, Kind= into *unstructured.Unstructured"}},
		{"merge patch gives data the wrong type", cm, types.MergePatchType, `{"data":{"key":1}}`,
			statusError{422, metav1.StatusReasonInvalid, `patch: Invalid value:`}},
		{"merge patch unknown field, strict", with(cm, func(o *patch.Options) { o.FieldValidation = "Strict" }), types.MergePatchType, `{"dta":{}}`,
			statusError{422, metav1.StatusReasonInvalid, `strict decoding error: unknown field "dta"`}},
		{"json patch duplicate field, strict", with(cm, func(o *patch.Options) { o.FieldValidation = "Strict" }), types.JSONPatchType, `[{"op":"add","op":"add","path":"/data/x","value":"y"}]`,
			statusError{422, metav1.StatusReasonInvalid, `json patch duplicate field "[0].op"`}},
		{"strategic merge patch unknown field, strict", with(cm, func(o *patch.Options) { o.FieldValidation = "Strict" }), types.StrategicMergePatchType, `{"dta":{}}`,
			statusError{422, metav1.StatusReasonInvalid, `unknown field "dta"`}},
		{"strategic merge patch with a bad directive", cm, types.StrategicMergePatchType, `{"data":{"$patch":"explode"}}`,
			statusError{400, metav1.StatusReasonBadRequest, "unknown patch type: explode in map"}},
		{"merge patch of a missing object", missingCM, types.MergePatchType, `{}`,
			statusError{404, metav1.StatusReasonNotFound, `configmaps "a" not found`}},
		{"apply body is not YAML", cm, types.ApplyYAMLPatchType, "a: [",
			statusError{400, metav1.StatusReasonBadRequest, "error encoding patch"}},
		{"apply of another version", cm, types.ApplyYAMLPatchType, "apiVersion: v2\nkind: ConfigMap\nmetadata:\n  name: a\n",
			statusError{400, metav1.StatusReasonBadRequest, "invalid object type: /v2, Kind=ConfigMap"}},
		{"apply with managedFields", cm, types.ApplyYAMLPatchType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  managedFields: [{manager: x}]\n",
			statusError{400, metav1.StatusReasonBadRequest, "metadata.managedFields must be nil"}},
		{"apply a field not in the schema", cm, types.ApplyYAMLPatchType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nspec: {}\n",
			statusError{400, metav1.StatusReasonBadRequest, "failed to create typed patch object (/a; /v1, Kind=ConfigMap): .spec: field not declared in schema"}},
		{"apply a number as a string value", cm, types.ApplyYAMLPatchType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  key: 1\n",
			statusError{400, metav1.StatusReasonBadRequest, ".data.key: expected string, got"}},
		{"apply duplicate field, strict", with(cm, func(o *patch.Options) { o.FieldValidation = "Strict" }), types.ApplyYAMLPatchType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: x1\n  k: x2\n",
			statusError{400, metav1.StatusReasonBadRequest, "error strict decoding patch: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"k\" already set in map"}},
		{"apply creates with a uid", missingCM, types.ApplyYAMLPatchType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  uid: u1\n",
			statusError{409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on configmaps "a": uid mismatch: the provided object specified uid u1, and no existing object was found`}},
		{"apply creates another name", missingCM, types.ApplyYAMLPatchType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
			statusError{400, metav1.StatusReasonBadRequest, "the name of the object (b) does not match the name on the URL (a)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := tc.target
			obj, err := doPatch(tg.p, tg.current(t, tg.p), tc.patchType, []byte(tc.body), tg.opts)
			if err == nil {
				t.Fatalf("Patch succeeded with %v, want an error", obj)
			}
			checkStatus(t, err, tc.want)
		})
	}
}

// Under fieldValidation=Warn (and by default) unknown and duplicate fields
// do not fail the patch: they come back as a strict decoding error along
// with the patched object, for the handler to send as warnings.
func TestPatchWarnings(t *testing.T) {
	p := newPatcher(t, configMaps(t))
	cases := []struct {
		name      string
		patchType types.PatchType
		body      string
		want      string
	}{
		{"merge patch", types.MergePatchType, `{"dta":{},"data":{"x":"y"}}`, `unknown field "dta"`},
		{"json patch", types.JSONPatchType, `[{"op":"add","path":"/dta","value":{}},{"op":"add","path":"/data/x","value":"y"}]`, `unknown field "dta"`},
		{"strategic merge patch", types.StrategicMergePatchType, `{"dta":{},"data":{"x":"y"}}`, `unknown field "dta"`},
		{"apply", types.ApplyYAMLPatchType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"y\"\n  x: \"y\"\n", `line 7: key "x" already set in map`},
	}
	for _, tc := range cases {
		for _, directive := range []string{"", metav1.FieldValidationWarn, metav1.FieldValidationIgnore} {
			t.Run(fmt.Sprintf("%s/%q", tc.name, directive), func(t *testing.T) {
				opts := cmOpts
				opts.FieldValidation = directive
				obj, err := doPatch(p, storedConfigMap(t, p), tc.patchType, []byte(tc.body), opts)
				if directive == metav1.FieldValidationIgnore {
					if err != nil {
						t.Fatalf("Patch: %v, want no error under Ignore", err)
					}
				} else if !runtime.IsStrictDecodingError(err) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want a strict decoding error with %q", err, tc.want)
				}
				if got := obj.(*corev1.ConfigMap).Data["x"]; got != "y" {
					t.Fatalf("data.x = %q, want the patch applied", got)
				}
			})
		}
	}
}

func TestApplyCreates(t *testing.T) {
	p := newPatcher(t, configMaps(t))
	body := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: web\ndata:\n  key: value\n"
	out, err := doPatch(p, nil, types.ApplyYAMLPatchType, []byte(body), cmOpts)
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	cm := out.(*corev1.ConfigMap)
	if cm.Name != "a" || cm.Namespace != "ns" || cm.Data["key"] != "value" || cm.Labels["app"] != "web" {
		t.Fatalf("created %+v, want a in ns with data and label", cm)
	}
	e := entry(cm.ManagedFields, "tester", metav1.ManagedFieldsOperationApply, "")
	if e == nil || len(cm.ManagedFields) != 1 {
		t.Fatalf("managedFields = %s, want one Apply entry for tester", managers(cm.ManagedFields))
	}
	const wantFields = `{"f:data":{"f:key":{}},"f:metadata":{"f:labels":{"f:app":{}}}}`
	if e.APIVersion != "v1" || e.FieldsType != "FieldsV1" || string(e.FieldsV1.Raw) != wantFields || e.Time == nil {
		t.Fatalf("apply entry = %+v fields %s, want v1 FieldsV1 %s with a time", e, e.FieldsV1.Raw, wantFields)
	}
}

func TestApplyConflicts(t *testing.T) {
	p := newPatcher(t, configMaps(t))
	body := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  key: mine\n")

	_, err := doPatch(p, storedConfigMap(t, p), types.ApplyYAMLPatchType, body, cmOpts)
	checkStatus(t, err, statusError{http.StatusConflict, metav1.StatusReasonConflict,
		`Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.key`})
	causes := err.(apierrors.APIStatus).Status().Details.Causes
	wantCause := metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-client-side-apply" using v1`, Field: ".data.key"}
	if len(causes) != 1 || causes[0] != wantCause {
		t.Fatalf("causes = %+v, want [%+v]", causes, wantCause)
	}

	forced := cmOpts
	forced.Force = true
	out, err := doPatch(p, storedConfigMap(t, p), types.ApplyYAMLPatchType, body, forced)
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	cm := out.(*corev1.ConfigMap)
	if cm.Data["key"] != "mine" {
		t.Fatalf("data.key = %q, want mine", cm.Data["key"])
	}
	if e := entry(cm.ManagedFields, "kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate, ""); e == nil || strings.Contains(string(e.FieldsV1.Raw), "f:key") {
		t.Fatalf("managedFields = %s: the forced apply must take data.key from kubectl-client-side-apply", managers(cm.ManagedFields))
	}

	// Two managers in conflict on two fields: kube lists them by manager.
	two := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: api\ndata:\n  key: mine\n")
	_, err = doPatch(p, storedConfigMap(t, p), types.ApplyYAMLPatchType, two, cmOpts)
	checkStatus(t, err, statusError{http.StatusConflict, metav1.StatusReasonConflict,
		"Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using v1:\n- .data.key\n- .metadata.labels.app"})
}

// A second apply by the same manager that leaves a field out removes it;
// a field another manager also set stays.
func TestApplyUpdates(t *testing.T) {
	p := newPatcher(t, configMaps(t))
	first := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  one: \"1\"\n  two: \"2\"\n")
	second := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  one: \"1\"\n")
	obj, err := doPatch(p, storedConfigMap(t, p), types.ApplyYAMLPatchType, first, cmOpts)
	if err != nil {
		t.Fatal(err)
	}
	obj, err = doPatch(p, obj, types.ApplyYAMLPatchType, second, cmOpts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"key": "value", "one": "1"}
	if got := obj.(*corev1.ConfigMap).Data; !reflect.DeepEqual(got, want) {
		t.Fatalf("data = %v, want %v", got, want)
	}
}

// Apply on /status records the subresource and does not take ownership of
// spec, which the REST layer's status rules restore.
func TestApplyStatusSubresource(t *testing.T) {
	p := newPatcher(t, widgets())
	opts := widgetOpts
	opts.Subresource = "status"
	body := []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nstatus:\n  ready: false\nspec:\n  size: 9\n")
	out, err := doPatch(p, storedWidget(t, p), types.ApplyYAMLPatchType, body, opts)
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	u := out.(*unstructured.Unstructured)
	if ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready"); ready {
		t.Errorf("status.ready = true, want the applied false")
	}
	e := entry(u.GetManagedFields(), "tester", metav1.ManagedFieldsOperationApply, "status")
	if e == nil || string(e.FieldsV1.Raw) != `{"f:status":{".":{},"f:ready":{}}}` {
		t.Errorf("managedFields = %s, want tester to own only status.ready through status", managers(u.GetManagedFields()))
	}
	opts.Subresource = "scale"
	_, err = doPatch(p, storedWidget(t, p), types.ApplyYAMLPatchType, body, opts)
	checkStatus(t, err, statusError{404, metav1.StatusReasonNotFound, `widgets.example.com "w" not found`})
}

func entry(entries []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, subresource string) *metav1.ManagedFieldsEntry {
	for i, e := range entries {
		if e.Manager == manager && e.Operation == op && e.Subresource == subresource {
			return &entries[i]
		}
	}
	return nil
}

func managers(entries []metav1.ManagedFieldsEntry) string {
	var s []string
	for _, e := range entries {
		s = append(s, fmt.Sprintf("%s/%s/%s %s", e.Manager, e.Operation, e.Subresource, e.FieldsV1.Raw))
	}
	return "[" + strings.Join(s, "; ") + "]"
}
