package corev1

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const keyMessage = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"

func messages(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func check(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := messages(errs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors:\n got %q\nwant %q", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

func TestConfigMap(t *testing.T) {
	big := strings.Repeat("x", v1.MaxSecretSize)
	for _, tc := range []struct {
		name string
		cm   v1.ConfigMap
		want []string
	}{
		{"valid", v1.ConfigMap{Data: map[string]string{"a.b": "1"}, BinaryData: map[string][]byte{"c": {1}}}, nil},
		{"bad data key", v1.ConfigMap{Data: map[string]string{"a b": "1"}}, []string{`data[a b]: Invalid value: "a b": ` + keyMessage}},
		{"bad binary key", v1.ConfigMap{BinaryData: map[string][]byte{"..": {1}}}, []string{`binaryData[..]: Invalid value: "..": must not be '..'`}},
		{"duplicate key", v1.ConfigMap{Data: map[string]string{"k": "1"}, BinaryData: map[string][]byte{"k": {1}}}, []string{`data[k]: Invalid value: "k": duplicate of key present in binaryData`}},
		{"exactly 1 MiB", v1.ConfigMap{Data: map[string]string{"a": big}}, nil},
		{"over 1 MiB", v1.ConfigMap{Data: map[string]string{"a": big}, BinaryData: map[string][]byte{"b": {1}}}, []string{`[]: Too long: may not be more than 1048576 bytes`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, ConfigMapStrategy().Validate(context.Background(), &tc.cm), tc.want)
		})
	}
}

func TestConfigMapUpdate(t *testing.T) {
	immutable := v1.ConfigMap{Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {1}}, Immutable: ptr(true)}
	for _, tc := range []struct {
		name     string
		old, new v1.ConfigMap
		want     []string
	}{
		{"mutable data changes", v1.ConfigMap{Data: map[string]string{"a": "1"}}, v1.ConfigMap{Data: map[string]string{"a": "2"}}, nil},
		{"made immutable", v1.ConfigMap{Data: map[string]string{"a": "1"}}, immutable, nil},
		{"immutable unchanged", immutable, immutable, nil},
		{"immutable unset", immutable, v1.ConfigMap{Data: immutable.Data, BinaryData: immutable.BinaryData}, []string{"immutable: Forbidden: field is immutable when `immutable` is set"}},
		{"immutable set false", immutable, v1.ConfigMap{Data: immutable.Data, BinaryData: immutable.BinaryData, Immutable: ptr(false)}, []string{"immutable: Forbidden: field is immutable when `immutable` is set"}},
		{"immutable data changed", immutable, v1.ConfigMap{Data: map[string]string{"a": "2"}, BinaryData: immutable.BinaryData, Immutable: ptr(true)}, []string{"data: Forbidden: field is immutable when `immutable` is set"}},
		{"immutable binary data changed", immutable, v1.ConfigMap{Data: immutable.Data, Immutable: ptr(true)}, []string{"binaryData: Forbidden: field is immutable when `immutable` is set"}},
		{"new keys still checked", v1.ConfigMap{}, v1.ConfigMap{Data: map[string]string{"a b": ""}}, []string{`data[a b]: Invalid value: "a b": ` + keyMessage}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, ConfigMapStrategy().ValidateUpdate(context.Background(), &tc.new, &tc.old), tc.want)
		})
	}
}

func TestSecretPrepare(t *testing.T) {
	s := &v1.Secret{Data: map[string][]byte{"a": []byte("old"), "b": []byte("kept")}, StringData: map[string]string{"a": "new", "c": "added"}}
	SecretStrategy().PrepareForCreate(context.Background(), s)
	if s.Type != v1.SecretTypeOpaque {
		t.Errorf("type = %q, want Opaque", s.Type)
	}
	if s.StringData != nil {
		t.Errorf("stringData kept: %v", s.StringData)
	}
	want := map[string]string{"a": "new", "b": "kept", "c": "added"}
	if len(s.Data) != len(want) {
		t.Fatalf("data = %q, want %q", s.Data, want)
	}
	for k, v := range want {
		if string(s.Data[k]) != v {
			t.Errorf("data[%s] = %q, want %q", k, s.Data[k], v)
		}
	}

	upd := &v1.Secret{Type: v1.SecretTypeTLS, StringData: map[string]string{"tls.crt": "c", "tls.key": "k"}}
	SecretStrategy().PrepareForUpdate(context.Background(), upd, &v1.Secret{})
	if upd.Type != v1.SecretTypeTLS || string(upd.Data["tls.crt"]) != "c" || upd.StringData != nil {
		t.Errorf("update not normalized: %+v", upd)
	}
}

func TestSecret(t *testing.T) {
	data := func(kv ...string) map[string][]byte {
		m := map[string][]byte{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = []byte(kv[i+1])
		}
		return m
	}
	for _, tc := range []struct {
		name string
		s    v1.Secret
		want []string
	}{
		{"opaque", v1.Secret{Type: v1.SecretTypeOpaque, Data: data("a", "1")}, nil},
		{"unknown type", v1.Secret{Type: "example.com/custom"}, nil},
		{"bootstrap token", v1.Secret{Type: v1.SecretTypeBootstrapToken}, nil},
		{"bad key", v1.Secret{Type: v1.SecretTypeOpaque, Data: data("a/b", "1")}, []string{`data[a/b]: Invalid value: "a/b": ` + keyMessage}},
		{"too large", v1.Secret{Type: v1.SecretTypeOpaque, Data: data("a", strings.Repeat("x", v1.MaxSecretSize), "b", "1")}, []string{`data: Too long: may not be more than 1048576 bytes`}},
		{"service account token without account", v1.Secret{Type: v1.SecretTypeServiceAccountToken}, []string{`metadata.annotations[kubernetes.io/service-account.name]: Required value`}},
		{"service account token", v1.Secret{Type: v1.SecretTypeServiceAccountToken, ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1.ServiceAccountNameKey: "default"}}}, nil},
		{"dockercfg missing", v1.Secret{Type: v1.SecretTypeDockercfg}, []string{`data[.dockercfg]: Required value`}},
		{"dockercfg not json", v1.Secret{Type: v1.SecretTypeDockercfg, Data: data(".dockercfg", "{")}, []string{`data[.dockercfg]: Invalid value: "<secret contents redacted>": unexpected end of JSON input`}},
		{"dockercfg", v1.Secret{Type: v1.SecretTypeDockercfg, Data: data(".dockercfg", "{}")}, nil},
		{"dockerconfigjson missing", v1.Secret{Type: v1.SecretTypeDockerConfigJson}, []string{`data[.dockerconfigjson]: Required value`}},
		{"dockerconfigjson not an object", v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: data(".dockerconfigjson", "[]")}, []string{`data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": json: cannot unmarshal array into Go value of type map[string]interface {}`}},
		{"basic auth empty", v1.Secret{Type: v1.SecretTypeBasicAuth}, []string{`data[username]: Required value`, `data[password]: Required value`}},
		{"basic auth password only", v1.Secret{Type: v1.SecretTypeBasicAuth, Data: data("password", "")}, nil},
		{"ssh auth empty key", v1.Secret{Type: v1.SecretTypeSSHAuth, Data: data("ssh-privatekey", "")}, []string{`data[ssh-privatekey]: Required value`}},
		{"ssh auth", v1.Secret{Type: v1.SecretTypeSSHAuth, Data: data("ssh-privatekey", "k")}, nil},
		{"tls missing both", v1.Secret{Type: v1.SecretTypeTLS}, []string{`data[tls.crt]: Required value`, `data[tls.key]: Required value`}},
		{"tls", v1.Secret{Type: v1.SecretTypeTLS, Data: data("tls.crt", "", "tls.key", "")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, SecretStrategy().Validate(context.Background(), &tc.s), tc.want)
		})
	}
}

func TestSecretUpdate(t *testing.T) {
	immutable := v1.Secret{Type: v1.SecretTypeOpaque, Data: map[string][]byte{"a": []byte("1")}, Immutable: ptr(true)}
	for _, tc := range []struct {
		name     string
		old, new v1.Secret
		want     []string
	}{
		{"data changes", v1.Secret{Type: v1.SecretTypeOpaque}, v1.Secret{Type: v1.SecretTypeOpaque, Data: map[string][]byte{"a": nil}}, nil},
		{"type changes", v1.Secret{Type: v1.SecretTypeOpaque}, v1.Secret{Type: "other"}, []string{`type: Invalid value: "other": field is immutable`}},
		{"immutable unset", immutable, v1.Secret{Type: v1.SecretTypeOpaque, Data: immutable.Data}, []string{"immutable: Forbidden: field is immutable when `immutable` is set"}},
		{"immutable data changed", immutable, v1.Secret{Type: v1.SecretTypeOpaque, Immutable: ptr(true)}, []string{"data: Forbidden: field is immutable when `immutable` is set"}},
		{"immutable unchanged", immutable, immutable, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, SecretStrategy().ValidateUpdate(context.Background(), &tc.new, &tc.old), tc.want)
		})
	}
}

func TestServiceAccountSecretReferences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(obj runtime.Object)
	}{
		{"create", func(obj runtime.Object) { ServiceAccountStrategy().PrepareForCreate(context.Background(), obj) }},
		{"update", func(obj runtime.Object) {
			ServiceAccountStrategy().PrepareForUpdate(context.Background(), obj, &v1.ServiceAccount{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sa := &v1.ServiceAccount{Secrets: []v1.ObjectReference{{Name: "s", Namespace: "other", Kind: "Secret", UID: "u"}}}
			tc.prepare(sa)
			if want := (v1.ObjectReference{Name: "s"}); sa.Secrets[0] != want {
				t.Errorf("secret reference = %+v, want %+v", sa.Secrets[0], want)
			}
		})
	}
}

func TestEvent(t *testing.T) {
	now := metav1.NewMicroTime(metav1.Now().Time)
	newEvent := func(mutate func(*v1.Event)) v1.Event {
		ev := v1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: "ns"},
			InvolvedObject:      v1.ObjectReference{Namespace: "ns", Name: "p", Kind: "Pod"},
			EventTime:           now,
			ReportingController: "example.com/ctl",
			ReportingInstance:   "ctl-1",
			Action:              "Act",
			Reason:              "Why",
		}
		mutate(&ev)
		return ev
	}
	for _, tc := range []struct {
		name string
		ev   v1.Event
		want []string
	}{
		{"legacy", v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, InvolvedObject: v1.ObjectReference{Namespace: "ns"}}, nil},
		{"legacy cluster-scoped object in default", v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}}, nil},
		{"legacy cluster-scoped object elsewhere", v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}, []string{`involvedObject.namespace: Invalid value: "": does not match event.namespace`}},
		{"legacy namespace mismatch", v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, InvolvedObject: v1.ObjectReference{Namespace: "other"}}, []string{`involvedObject.namespace: Invalid value: "other": does not match event.namespace`}},
		{"new", newEvent(func(*v1.Event) {}), nil},
		{"new cluster-scoped object in kube-system", newEvent(func(e *v1.Event) { e.Namespace, e.InvolvedObject.Namespace = "kube-system", "" }), nil},
		{"new cluster-scoped object elsewhere", newEvent(func(e *v1.Event) { e.InvolvedObject.Namespace = "" }), []string{`involvedObject.namespace: Invalid value: "": does not match event.namespace`}},
		{"new without reporter, action, reason", newEvent(func(e *v1.Event) { e.ReportingController, e.ReportingInstance, e.Action, e.Reason = "", "", "", "" }), []string{
			`reportingController: Required value`,
			`reportingController: Invalid value: "": name part must be non-empty`,
			`reportingController: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`reportingInstance: Required value`,
			`action: Required value`,
			`reason: Required value`,
		}},
		{"new too long", newEvent(func(e *v1.Event) {
			e.ReportingInstance, e.Action, e.Reason, e.Message = strings.Repeat("i", 129), strings.Repeat("a", 129), strings.Repeat("r", 129), strings.Repeat("m", 1025)
		}), []string{
			`reportingInstance: Invalid value: "": can have at most 128 characters`,
			`action: Invalid value: "": can have at most 128 characters`,
			`reason: Invalid value: "": can have at most 128 characters`,
			`message: Invalid value: "": can have at most 1024 characters`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, EventStrategy().Validate(context.Background(), &tc.ev), tc.want)
			old := tc.ev.DeepCopy()
			old.Message = "changed: core/v1 events are not immutable"
			check(t, EventStrategy().ValidateUpdate(context.Background(), &tc.ev, old), tc.want)
		})
	}
}
