package admissionreview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/warning"

	"kplane.dev/libs/apiserver/admissionreview"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	"kplane.dev/proto/admission"
)

// recorder keeps the warnings sent to the client.
type recorder struct{ texts []string }

func (r *recorder) AddWarning(_, text string) { r.texts = append(r.texts, text) }

// serve answers both phases with answer, after checking what it got.
func serve(t *testing.T, ns *natstest.Server, answer func(subject string, r *admission.Review) admission.Verdict) {
	t.Helper()
	srv := natsrpc.NewServer(ns.Connect(t), nil)
	for _, subject := range []string{admission.SubjectMutate, admission.SubjectValidate} {
		if err := srv.Handle(subject, admission.QueueGroup, func(_ context.Context, payload []byte) ([]byte, error) {
			var r admission.Review
			if err := json.Unmarshal(payload, &r); err != nil {
				return nil, err
			}
			return json.Marshal(answer(subject, &r))
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Drain(ctx); err != nil {
			t.Error(err)
		}
	})
}

func configMapWrite() *rest.Attributes {
	return &rest.Attributes{
		Operation: rest.Create,
		Resource:  corev1.SchemeGroupVersion.WithResource("configmaps"),
		Kind:      corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Namespace: "ns",
		Name:      "cm",
		Object:    &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}, Data: map[string]string{"a": "1"}},
	}
}

func TestPhases(t *testing.T) {
	ns := natstest.Start(t)
	serve(t, ns, func(subject string, r *admission.Review) admission.Verdict {
		var obj map[string]any
		if err := json.Unmarshal(r.Request.Object.Raw, &obj); err != nil || obj["kind"] == nil {
			return admission.Verdict{Allowed: false, Status: &metav1.Status{Code: 400, Message: "the object came without its kind"}}
		}
		switch {
		case r.Request.Name == "refused":
			return admission.Verdict{Allowed: false, Warnings: []string{"think again"}, Status: &metav1.Status{Code: 403, Reason: metav1.StatusReasonForbidden, Message: `admission webhook "deny.example.com" denied the request: no`}}
		case subject == admission.SubjectMutate:
			obj["data"] = map[string]any{"a": "1", "added": "yes"}
			raw, _ := json.Marshal(obj)
			return admission.Verdict{Allowed: true, Object: runtime.RawExtension{Raw: raw}, Warnings: []string{"mutated"}}
		}
		return admission.Verdict{Allowed: true}
	})
	a := admissionreview.New(ns.Connect(t), time.Minute)
	rec := &recorder{}
	ctx := warning.WithWarningRecorder(context.Background(), rec)

	t.Run("mutating phase", func(t *testing.T) {
		w := configMapWrite()
		if err := a.Admit(ctx, w); err != nil {
			t.Fatal(err)
		}
		cm, ok := w.Object.(*corev1.ConfigMap)
		if !ok || cm.Data["added"] != "yes" {
			t.Errorf("object after mutation = %#v, want the typed configmap with the added key", w.Object)
		}
		if len(rec.texts) != 1 || rec.texts[0] != "mutated" {
			t.Errorf("warnings %q", rec.texts)
		}
	})
	t.Run("an unstructured object", func(t *testing.T) {
		w := configMapWrite()
		w.Object = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}}}
		if err := a.Admit(ctx, w); err != nil {
			t.Fatal(err)
		}
		if u, ok := w.Object.(*unstructured.Unstructured); !ok || u.Object["data"] == nil {
			t.Errorf("object after mutation = %#v", w.Object)
		}
	})
	t.Run("validating phase", func(t *testing.T) {
		if err := a.Validate(ctx, configMapWrite()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a refusal", func(t *testing.T) {
		w := configMapWrite()
		w.Name = "refused"
		err := a.Validate(ctx, w)
		if !apierrors.IsForbidden(err) || err.Error() != `admission webhook "deny.example.com" denied the request: no` {
			t.Errorf("refusal: %v", err)
		}
	})
}

// TestFailsClosed: a write admission cannot be asked about is refused
// with 503, whether NATS is not configured or no replica answers.
func TestFailsClosed(t *testing.T) {
	ns := natstest.Start(t)
	for name, a := range map[string]*admissionreview.Admission{
		"no NATS":    admissionreview.New(nil, time.Minute),
		"no replica": admissionreview.New(ns.Connect(t), 2*time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			err := a.Admit(context.Background(), configMapWrite())
			if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code != http.StatusServiceUnavailable {
				t.Fatalf("admit: %v, want 503", err)
			}
		})
	}
}

// TestUnsynced shows a phase is asked again when the replica that took it
// had not read its configuration, and that a write no replica decides
// fails closed with 503 and a retry hint, not a guess that nothing
// matched.
func TestUnsynced(t *testing.T) {
	ns := natstest.Start(t)
	asks := 0
	serve(t, ns, func(string, *admission.Review) admission.Verdict {
		asks++
		if asks == 2 {
			return admission.Verdict{Allowed: true, Warnings: []string{"decided"}}
		}
		return admission.Verdict{Unsynced: true}
	})
	a := admissionreview.New(ns.Connect(t), 5*time.Second)
	rec := &recorder{}
	if err := a.Admit(warning.WithWarningRecorder(context.Background(), rec), configMapWrite()); err != nil {
		t.Fatalf("admit after one unsynced answer: %v", err)
	}
	if asks != 2 || len(rec.texts) != 1 {
		t.Fatalf("asked %d times with warnings %q, want 2 asks and the deciding replica's warning", asks, rec.texts)
	}

	asks = 2
	err := a.Validate(context.Background(), configMapWrite())
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Code != http.StatusServiceUnavailable || st.Status().Details == nil || st.Status().Details.RetryAfterSeconds != 1 {
		t.Fatalf("validate with every answer unsynced: %v, want 503 with retry after 1s", err)
	}
}

// TestIdle shows a phase the service called idle for a resource and
// operation is not asked again for such writes until admission.IdleFor
// has passed, while other operations and phases still are.
func TestIdle(t *testing.T) {
	ns := natstest.Start(t)
	var mu sync.Mutex
	asked := map[string]int{}
	serve(t, ns, func(subject string, r *admission.Review) admission.Verdict {
		mu.Lock()
		defer mu.Unlock()
		asked[subject+" "+string(r.Request.Operation)]++
		return admission.Verdict{Allowed: true, Idle: r.Request.Operation == "CREATE"}
	})
	now := time.Now()
	a := admissionreview.New(ns.Connect(t), 5*time.Second, admissionreview.WithClock(func() time.Time { return now }))
	update := configMapWrite()
	update.Operation = rest.Update
	for range 3 {
		for _, w := range []*rest.Attributes{configMapWrite(), update} {
			if err := a.Admit(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			if err := a.Validate(context.Background(), w); err != nil {
				t.Fatal(err)
			}
		}
	}
	now = now.Add(admission.IdleFor)
	if err := a.Admit(context.Background(), configMapWrite()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{
		admission.SubjectMutate + " CREATE": 2, admission.SubjectValidate + " CREATE": 1,
		admission.SubjectMutate + " UPDATE": 3, admission.SubjectValidate + " UPDATE": 3,
	}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("asked %v, want %v: creates once per phase until the idle time passes, updates every time", asked, want)
	}
}

// TestEquivalents shows a write's equivalent resources, and the CRD to
// convert with, reaching admission; a write without equivalents sends
// no CRD, whatever its resource declares.
func TestEquivalents(t *testing.T) {
	ns := natstest.Start(t)
	got := make(chan *admission.Review, 2)
	serve(t, ns, func(subject string, r *admission.Review) admission.Verdict {
		if subject == admission.SubjectValidate {
			got <- r
		}
		return admission.Verdict{Allowed: true}
	})
	a := admissionreview.New(ns.Connect(t), time.Minute)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Generation: 3}}
	w := configMapWrite()
	w.Equivalents = []resource.Equivalent{{
		Resource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Kind:     schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
	}}
	w.Definition = crd
	if err := a.Validate(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	r := <-got
	want := []admission.Equivalent{{
		Resource: metav1.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Kind:     metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
	}}
	if !reflect.DeepEqual(r.Equivalents, want) || r.Definition == nil || r.Definition.Name != crd.Name || r.Definition.Generation != 3 {
		t.Errorf("equivalents %+v, definition %+v; want %+v and the CRD", r.Equivalents, r.Definition, want)
	}
	w.Equivalents = nil
	if err := a.Validate(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.Equivalents != nil || r.Definition != nil {
		t.Errorf("a write without equivalents sent %+v and %+v", r.Equivalents, r.Definition)
	}
}
