package auditannotation

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	h := http.Header{}
	ctx := WithRecorder(context.Background(), h)
	Add(ctx, "validation.policy.admission.k8s.io/validation_failure", `[{"message":"a=b, c"}]`)
	Add(ctx, "example.com/first", "one\ntwo")
	Add(ctx, "example.com/first", "ignored: the first value stays")
	Add(context.Background(), "example.com/nowhere", "no recorder")
	h.Add(Header, "not an annotation")
	got := Take(h)
	want := map[string]string{
		"validation.policy.admission.k8s.io/validation_failure": `[{"message":"a=b, c"}]`,
		"example.com/first": "one\ntwo",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if v := h.Values(Header); len(v) != 0 {
		t.Errorf("Take left %q in the headers", v)
	}
}
