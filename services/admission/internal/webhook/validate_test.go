package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDenial(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result *metav1.Status
		want   metav1.Status
	}{
		{
			name:   "webhook's code and message",
			result: &metav1.Status{Code: http.StatusForbidden, Message: "pods need an owner"},
			want:   metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Message: `admission webhook "deny.example.com" denied the request: pods need an owner`},
		},
		{
			name:   "reason when no message",
			result: &metav1.Status{Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid},
			want:   metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: `admission webhook "deny.example.com" denied the request: Invalid`},
		},
		{
			name: "no status",
			want: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Message: `admission webhook "deny.example.com" denied the request without explanation`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, func(_ *http.Request, _ *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
				resp.Allowed, resp.Result = false, tc.result
			})
			d := dispatcher(t, validatingConfigs(validating("deny.example.com", s, nil)))
			_, err := d.Validate(context.Background(), createPod(pod(nil)))
			if got := statusOf(t, err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("status\n%+v, want\n%+v", got, tc.want)
			}
		})
	}
}

func TestWarningsAndAuditAnnotations(t *testing.T) {
	s := startServer(t, func(_ *http.Request, _ *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		resp.Warnings = []string{"image is not pinned"}
		resp.AuditAnnotations = map[string]string{"decision": "allowed"}
	})
	d := dispatcher(t, validatingConfigs(validating("a.example.com", s, nil), validating("b.example.com", s, nil)))
	res, err := d.Validate(context.Background(), createPod(pod(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"image is not pinned"}; !reflect.DeepEqual(res.Warnings, want) {
		t.Errorf("warnings %q, want %q (once)", res.Warnings, want)
	}
	want := map[string]string{"a.example.com/decision": "allowed", "b.example.com/decision": "allowed"}
	if !reflect.DeepEqual(res.AuditAnnotations, want) {
		t.Errorf("audit annotations %v, want %v", res.AuditAnnotations, want)
	}
}

func TestFailurePolicy(t *testing.T) {
	slow := startServer(t, func(r *http.Request, _ *admissionv1.AdmissionRequest, _ *admissionv1.AdmissionResponse) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	unreachable := unreachableURL(t)
	for _, tc := range []struct {
		name    string
		url     string
		timeout *int32
		policy  admissionregistrationv1.FailurePolicyType
		// message is the refusal's beginning; empty when the write passes.
		message string
	}{
		{
			name: "unreachable, Fail", url: unreachable, policy: admissionregistrationv1.Fail,
			message: `Internal error occurred: failed calling webhook "x.example.com": failed to call webhook: Post "` + unreachable + `?timeout=10s": dial tcp `,
		},
		{name: "unreachable, Ignore", url: unreachable, policy: admissionregistrationv1.Ignore},
		{
			name: "slow, Fail", url: slow.url + "/", timeout: ptr[int32](1), policy: admissionregistrationv1.Fail,
			message: `Internal error occurred: failed calling webhook "x.example.com": failed to call webhook: Post "` + slow.url + `/?timeout=1s": context deadline exceeded`,
		},
		{name: "slow, Ignore", url: slow.url + "/", timeout: ptr[int32](1), policy: admissionregistrationv1.Ignore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dispatcher(t, validatingConfigs(validating("x.example.com", slow, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.URL, w.TimeoutSeconds, w.FailurePolicy = &tc.url, tc.timeout, &tc.policy
			})))
			res, err := d.Validate(context.Background(), createPod(pod(nil)))
			if tc.message == "" {
				if err != nil {
					t.Fatal(err)
				}
				key := "failed-open.validating.webhook.admission.k8s.io/round_0_index_0"
				if res.AuditAnnotations[key] != "x.example.com" {
					t.Errorf("audit annotations %v, want %s", res.AuditAnnotations, key)
				}
				return
			}
			st := statusOf(t, err)
			if st.Code != http.StatusInternalServerError || st.Reason != metav1.StatusReasonInternalError || !strings.HasPrefix(st.Message, tc.message) {
				t.Errorf("status %d %s %q, want 500 InternalError %q...", st.Code, st.Reason, st.Message, tc.message)
			}
		})
	}
}

func TestDryRun(t *testing.T) {
	s := startServer(t, allow)
	for _, tc := range []struct {
		effects admissionregistrationv1.SideEffectClass
		called  bool
		message string
	}{
		{effects: admissionregistrationv1.SideEffectClassNone, called: true},
		{effects: admissionregistrationv1.SideEffectClassNoneOnDryRun, called: true},
		{effects: admissionregistrationv1.SideEffectClassSome, message: `admission webhook "x.example.com" does not support dry run`},
		{effects: admissionregistrationv1.SideEffectClassUnknown, message: `admission webhook "x.example.com" does not support dry run`},
	} {
		t.Run(string(tc.effects), func(t *testing.T) {
			before := s.calls()
			d := dispatcher(t, validatingConfigs(validating("x.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.SideEffects = &tc.effects
				// A dry run is refused whatever the failure policy.
				w.FailurePolicy = ptr(admissionregistrationv1.Ignore)
			})))
			a := createPod(pod(nil))
			a.Request.DryRun = ptr(true)
			_, err := d.Validate(context.Background(), a)
			if called := s.calls() > before; called != tc.called {
				t.Errorf("webhook called: %v, want %v", called, tc.called)
			}
			if tc.message == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if st := statusOf(t, err); st.Code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest || st.Message != tc.message {
				t.Errorf("status %d %s %q, want 400 BadRequest %q", st.Code, st.Reason, st.Message, tc.message)
			}
		})
	}
}

func TestInvalidResponse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		respond func(*http.Request, *admissionv1.AdmissionRequest, *admissionv1.AdmissionResponse)
		message string
	}{
		{
			name: "wrong uid",
			respond: func(_ *http.Request, _ *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
				resp.UID = "other"
			},
			message: `Internal error occurred: failed calling webhook "x.example.com": received invalid webhook response: expected response.uid="`,
		},
		{
			name: "patch from a validating webhook",
			respond: func(_ *http.Request, _ *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
				resp.Patch, resp.PatchType = []byte(`[]`), ptr(admissionv1.PatchTypeJSONPatch)
			},
			message: `Internal error occurred: failed calling webhook "x.example.com": received invalid webhook response: validating webhook may not return response.patch`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.respond)
			d := dispatcher(t, validatingConfigs(validating("x.example.com", s, nil)))
			_, err := d.Validate(context.Background(), createPod(pod(nil)))
			if st := statusOf(t, err); st.Code != http.StatusInternalServerError || !strings.HasPrefix(st.Message, tc.message) {
				t.Errorf("status %d %q, want 500 %q...", st.Code, st.Message, tc.message)
			}
		})
	}
}

func TestReviewVersions(t *testing.T) {
	s := startServer(t, allow)
	for _, tc := range []struct {
		versions []string
		want     string
	}{
		{versions: []string{"v1", "v1beta1"}, want: "admission.k8s.io/v1"},
		{versions: []string{"v2", "v1beta1", "v1"}, want: "admission.k8s.io/v1beta1"},
	} {
		d := dispatcher(t, validatingConfigs(validating("x.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
			w.AdmissionReviewVersions = tc.versions
		})))
		if _, err := d.Validate(context.Background(), createPod(pod(nil))); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		got := s.reviews[len(s.reviews)-1]["apiVersion"]
		s.mu.Unlock()
		if got != tc.want {
			t.Errorf("versions %v: sent %v, want %s", tc.versions, got, tc.want)
		}
	}
}

func TestServiceReference(t *testing.T) {
	s := startServer(t, allow)
	c := validatingConfigs(validating("svc.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
		w.ClientConfig.URL = nil
		w.ClientConfig.Service = &admissionregistrationv1.ServiceReference{
			Namespace: "webhooks", Name: "hook", Path: ptr("/check"), Port: ptr[int32](8443),
		}
	}))
	d, err := New(Config{Configurations: c, Namespaces: testNamespaces, Resolver: resolver{url: s.url}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Validate(context.Background(), createPod(pod(nil))); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.paths) != 1 || s.paths[0] != "/check" {
		t.Errorf("webhook called at %v, want /check once", s.paths)
	}
	if want := serviceName + ":8443"; len(s.hosts) != 1 || s.hosts[0] != want {
		t.Errorf("Host headers %q, want %s", s.hosts, want)
	}
	// The endpoint is an address; the certificate is checked against the
	// service's name.
	if len(s.serverNames) != 1 || s.serverNames[0] != serviceName {
		t.Errorf("TLS server names %q, want %s", s.serverNames, serviceName)
	}
}
