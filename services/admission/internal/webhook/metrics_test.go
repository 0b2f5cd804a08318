package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMetrics shows each call is counted under kube's names and labels: an
// allowed one, a refusal, and a webhook that could not be called.
func TestMetrics(t *testing.T) {
	s := startServer(t, func(_ *http.Request, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		if req.Name == "refused" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "no"}
		}
	})
	reg := prometheus.NewRegistry()
	c := validatingConfigs(
		validating("checks.example.com", s, nil),
		validating("gone.example.com", s, func(w *admissionregistrationv1.ValidatingWebhook) {
			w.ClientConfig.URL = ptr(unreachableURL(t))
			w.FailurePolicy = ptr(admissionregistrationv1.Ignore)
		}),
	)
	d, err := New(Config{Configurations: c, Namespaces: testNamespaces, Logger: slog.New(slog.DiscardHandler), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"allowed", "refused"} {
		p := pod(nil)
		p.SetName(name)
		a := createPod(p)
		a.Request.Name = name
		_, _ = d.Validate(context.Background(), a)
	}
	want := `
# HELP apiserver_admission_webhook_rejection_count Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400).
# TYPE apiserver_admission_webhook_rejection_count counter
apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="gone.example.com",operation="CREATE",rejection_code="0",type="validate"} 2
apiserver_admission_webhook_rejection_count{error_type="no_error",name="checks.example.com",operation="CREATE",rejection_code="403",type="validate"} 1
# HELP apiserver_admission_webhook_request_total Admission webhook request total, identified by name and broken out for each admission type (validating or mutating) and operation. Additional labels specify whether the request was rejected or not and an HTTP status code.
# TYPE apiserver_admission_webhook_request_total counter
apiserver_admission_webhook_request_total{code="0",name="gone.example.com",operation="CREATE",rejected="true",type="validate"} 2
apiserver_admission_webhook_request_total{code="200",name="checks.example.com",operation="CREATE",rejected="false",type="validate"} 1
apiserver_admission_webhook_request_total{code="200",name="checks.example.com",operation="CREATE",rejected="true",type="validate"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "apiserver_admission_webhook_rejection_count", "apiserver_admission_webhook_request_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "apiserver_admission_webhook_admission_duration_seconds"); n != 3 {
		t.Errorf("%d duration series, want 3 (allowed, refused, failed to call)", n)
	}
}
