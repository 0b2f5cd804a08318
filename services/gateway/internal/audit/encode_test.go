package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// metadataEvent is an event as make up's policy records a ConfigMap
// request.
func metadataEvent() auditv1.Event {
	at := time.Date(2026, 11, 29, 2, 39, 54, 51037000, time.UTC)
	return auditv1.Event{
		TypeMeta:   metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
		Level:      auditv1.LevelMetadata,
		AuditID:    "c24b5ee7-1935-4f11-9177-10dd6bdaf779",
		Stage:      auditv1.StageResponseComplete,
		RequestURI: "/api/v1/namespaces/kplane-load-vbwftf/configmaps/created-0-008590",
		Verb:       "delete",
		User: authnv1.UserInfo{
			Username: "system:serviceaccount:default:load",
			UID:      "58959250-acb7-4d75-a888-92e2193b1031",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
			Extra:    map[string]authnv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"JTI=b311dccb-b14e-4352-b691-7d19f6d36406"}},
		},
		SourceIPs:                []string{"127.0.0.1"},
		UserAgent:                "kplane-load/v0.0.0 (linux/amd64) kubernetes/$Format",
		ObjectRef:                &auditv1.ObjectReference{Resource: "configmaps", Namespace: "kplane-load-vbwftf", Name: "created-0-008590", APIVersion: "v1"},
		ResponseStatus:           &metav1.Status{Code: 200},
		RequestReceivedTimestamp: metav1.NewMicroTime(at),
		StageTimestamp:           metav1.NewMicroTime(at.Add(35 * time.Millisecond)),
		Annotations: map[string]string{
			"authorization.k8s.io/decision": "allow",
			"authorization.k8s.io/reason":   `RBAC: allowed by ClusterRoleBinding "load-admin" of ClusterRole "cluster-admin" to ServiceAccount "load/default"`,
		},
	}
}

func TestAppendEvent(t *testing.T) {
	tests := map[string]func(ev *auditv1.Event){
		"metadata level": func(*auditv1.Event) {},
		"empty":          func(ev *auditv1.Event) { *ev = auditv1.Event{} },
		"no object, no status": func(ev *auditv1.Event) {
			ev.ObjectRef, ev.ResponseStatus, ev.SourceIPs, ev.Annotations = nil, nil, nil, nil
		},
		"every object reference field": func(ev *auditv1.Event) {
			ev.ObjectRef = &auditv1.ObjectReference{Resource: "deployments", Namespace: "ns", Name: "n", UID: "u-1", APIGroup: "apps", APIVersion: "v1", ResourceVersion: "12", Subresource: "scale"}
		},
		"empty object reference": func(ev *auditv1.Event) { ev.ObjectRef = &auditv1.ObjectReference{} },
		"impersonation": func(ev *auditv1.Event) {
			ev.ImpersonatedUser = &authnv1.UserInfo{Username: "jane", Groups: []string{}, Extra: map[string]authnv1.ExtraValue{"b": nil, "a": {}, "c": {"x", "y"}}}
		},
		"refusal with details": func(ev *auditv1.Event) {
			ev.ResponseStatus = &metav1.Status{Status: metav1.StatusFailure, Message: `configmaps "x" not found`, Reason: metav1.StatusReasonNotFound, Details: &metav1.StatusDetails{Name: "x", Kind: "configmaps"}, Code: 404}
		},
		"status without details": func(ev *auditv1.Event) {
			ev.ResponseStatus = &metav1.Status{Status: metav1.StatusSuccess, Message: "Connection closed early", Code: 200}
		},
		"status with type and list metadata": func(ev *auditv1.Event) {
			n := int64(3)
			ev.ResponseStatus = &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "9", RemainingItemCount: &n}}
		},
		"empty status": func(ev *auditv1.Event) { ev.ResponseStatus = &metav1.Status{} },
		"request and response bodies": func(ev *auditv1.Event) {
			ev.Level = auditv1.LevelRequestResponse
			ev.RequestObject = &runtime.Unknown{Raw: []byte(`{"kind": "Widget", "spec": {"html": "<b>&</b>"}}`), ContentType: runtime.ContentTypeJSON}
			ev.ResponseObject = &runtime.Unknown{Raw: []byte(`{"kind":"Widget"}`), ContentType: runtime.ContentTypeJSON}
		},
		// Bodies as the audit records them, compact, and as it does not:
		// appendEvent writes some as they are, json.Marshal the rest.
		"compact bodies": func(ev *auditv1.Event) {
			ev.Level = auditv1.LevelRequestResponse
			ev.RequestObject = &runtime.Unknown{Raw: []byte(`{"kind":"Widget","spec":{"text":"a b\\\" {\"c\": [1, 2]}","n":[1,2.5e3,true,null]}}`), ContentType: runtime.ContentTypeJSON}
			ev.ResponseObject = &runtime.Unknown{Raw: []byte(`{"kind":"Widget","spec":{"text":"\u003cb\u003e é 日本 \\"}}`)}
		},
		"bodies json.Marshal changes": func(ev *auditv1.Event) {
			ev.Level = auditv1.LevelRequestResponse
			ev.RequestObject = &runtime.Unknown{Raw: []byte("{\"kind\":\"Widget\",\"spec\":{\"line\":\"\u2028\",\"html\":\"<b>\"}}"), ContentType: runtime.ContentTypeJSON}
			ev.ResponseObject = &runtime.Unknown{Raw: []byte("{\"kind\":\"Widget\",\n \"spec\":\t{\"a\":\"x y\"}\r}")}
		},
		// A quote escaped, or a backslash, read as ending a string would
		// put the space after the string in one.
		"a string that ends in an escaped quote, then a space": func(ev *auditv1.Event) {
			ev.Level = auditv1.LevelRequest
			ev.RequestObject = &runtime.Unknown{Raw: []byte(`{"a":"\"" ,"b":1}`), ContentType: runtime.ContentTypeJSON}
		},
		"a string that ends in an escaped backslash, then a space": func(ev *auditv1.Event) {
			ev.Level = auditv1.LevelRequest
			ev.RequestObject = &runtime.Unknown{Raw: []byte(`{"a":"\\"}`), ContentType: runtime.ContentTypeJSON}
			ev.ResponseObject = &runtime.Unknown{Raw: []byte(`{"a":"\\\\" ,"b":"\\\"" ,"c":1}`), ContentType: runtime.ContentTypeJSON}
		},
		"authentication metadata": func(ev *auditv1.Event) {
			ev.AuthenticationMetadata = &auditv1.AuthenticationMetadata{ImpersonationConstraint: "impersonate:user-info"}
		},
		"strings json escapes": func(ev *auditv1.Event) {
			ev.RequestURI = "/api/v1/namespaces/a/configmaps?labelSelector=a%3Db&x=<y>&z=\"q\"\\"
			ev.UserAgent = "agent\x00\x01\x1f\b\f\n\r\t\x7f é 日本 \u2028\u2029 \xff\xfe bad"
			ev.User.Username = "<script>&amp;"
			ev.Annotations["key with \"quotes\""] = "\u2028"
			ev.Annotations[""] = ""
		},
		"zero and non-UTC timestamps": func(ev *auditv1.Event) {
			ev.RequestReceivedTimestamp = metav1.MicroTime{}
			ev.StageTimestamp = metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 999, time.FixedZone("x", 3600)))
		},
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			ev := metadataEvent()
			change(&ev)
			checkAppendEvent(t, &ev)
		})
	}
}

func checkAppendEvent(t *testing.T, ev *auditv1.Event) {
	t.Helper()
	want, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendEvent([]byte("x"), ev)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "x"+string(want) {
		t.Errorf("appendEvent =\n%s\nwant what json.Marshal writes, after what was in the buffer:\nx%s", got, want)
	}
}

// FuzzAppendEvent holds appendEvent to json.Marshal's output for any
// strings in the fields a client controls.
func FuzzAppendEvent(f *testing.F) {
	f.Add("/api/v1/namespaces/default/configmaps", "kubectl/v1.35", "admin", "system:masters", "key", "value", int32(201))
	f.Add("/x?<y>&z", "\x00\xff\u2028", "é日本", "\"\\", "\b\f", "\t\n\r", int32(0))
	f.Fuzz(func(t *testing.T, uri, agent, user, group, key, value string, code int32) {
		ev := metadataEvent()
		ev.RequestURI, ev.UserAgent, ev.User.Username = uri, agent, user
		ev.User.Groups = append(ev.User.Groups, group)
		ev.User.Extra[key] = authnv1.ExtraValue{value}
		ev.Annotations[key] = value
		ev.ObjectRef.Name = value
		ev.ResponseStatus = &metav1.Status{Code: code, Message: value, Reason: metav1.StatusReason(key)}
		checkAppendEvent(t, &ev)
	})
}

// FuzzAppendEventBody holds appendEvent to json.Marshal on recorded
// bodies, which are valid JSON: those it writes as they are and those it
// leaves to json.Marshal.
func FuzzAppendEventBody(f *testing.F) {
	f.Add(`{"kind":"Widget","spec":{"a":"b c","d":[1,2]}}`)
	f.Add(`{"a":"\"" ,"b":1}`)
	f.Add(`{"a":"\\\\" ,"b":1}`)
	f.Add(`{"a":"<&>\u2028"}`)
	f.Add("{\"a\":\"\u2029\"}")
	f.Add(" [ 1 , \"x\" ] ")
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) {
			t.Skip()
		}
		ev := metadataEvent()
		ev.Level = auditv1.LevelRequest
		ev.RequestObject = &runtime.Unknown{Raw: []byte(body), ContentType: runtime.ContentTypeJSON}
		checkAppendEvent(t, &ev)
	})
}

// BenchmarkEncodeEvent compares appendEvent with json.Marshal on an
// event of make up's policy: a ConfigMap's, at level Metadata, and a
// custom resource's create, at level Request.
func BenchmarkEncodeEvent(b *testing.B) {
	b.Run("metadata", func(b *testing.B) { benchmarkEncodeEvent(b, metadataEvent()) })
	ev := metadataEvent()
	ev.Level, ev.Verb = auditv1.LevelRequest, "create"
	ev.RequestObject = &runtime.Unknown{Raw: []byte(`{"apiVersion":"load.kplane.dev/v1","kind":"Blob","metadata":{"name":"created-0-000001","namespace":"kplane-load-vbwftf","labels":{"load":"true"}},"spec":{"data":"` + strings.Repeat("x", 1024) + `"}}`), ContentType: runtime.ContentTypeJSON}
	b.Run("request", func(b *testing.B) { benchmarkEncodeEvent(b, ev) })
}

func benchmarkEncodeEvent(b *testing.B, ev auditv1.Event) {
	b.Run("appendEvent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := appendEvent(make([]byte, 0, eventSize), &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
