package chain

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/proto/admission"
	"kplane.dev/services/admission/internal/review"
)

// labeller sets a label and warns.
type labeller struct{ key, value string }

func (l labeller) Mutate(_ context.Context, a *review.Attributes) (*review.Result, error) {
	obj := a.Object.DeepCopy()
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[l.key] = l.value + "/" + labels[l.key]
	obj.SetLabels(labels)
	return &review.Result{Object: obj, Warnings: []string{"labelled " + l.key}}, nil
}

// refuser warns, then refuses or fails.
type refuser struct{ err error }

func (r refuser) Validate(context.Context, *review.Attributes) (*review.Result, error) {
	return &review.Result{Warnings: []string{"looked"}}, r.err
}

func write(user string, groups ...string) *admission.Review {
	return &admission.Review{Request: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create,
		UserInfo:  authenticationv1.UserInfo{Username: user, Groups: groups},
		Object:    runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"a":"0"}}}`)},
	}}
}

func TestUnsynced(t *testing.T) {
	var synced atomic.Bool
	c, err := New(Config{Synced: synced.Load, StartUsers: []string{"system:kplane:core"}, Validators: []Validator{refuser{err: apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("no"))}}})
	if err != nil {
		t.Fatal(err)
	}
	masters := []string{"system:masters", "system:authenticated"}
	for _, tc := range []struct {
		name          string
		synced        bool
		user          string
		groups        []string
		allowed, wait bool
	}{
		{"a user before the configuration is read waits", false, "alice", masters, false, true},
		{"a start user before it is read passes", false, "system:kplane:core", masters, true, false},
		{"a start user's name outside system:masters waits", false, "system:kplane:core", []string{"system:authenticated"}, false, true},
		{"a start user after it is read is decided", true, "system:kplane:core", masters, false, false},
		{"a user after it is read is decided", true, "alice", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synced.Store(tc.synced)
			v, err := c.Validate(context.Background(), write(tc.user, tc.groups...))
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != tc.allowed || v.Unsynced != tc.wait {
				t.Errorf("verdict allowed=%t unsynced=%t, want %t and %t", v.Allowed, v.Unsynced, tc.allowed, tc.wait)
			}
		})
	}
}

func TestMutatorsRunInOrder(t *testing.T) {
	c, err := New(Config{Synced: func() bool { return true }, Mutators: []Mutator{labeller{"a", "first"}, labeller{"a", "second"}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Mutate(context.Background(), write("alice"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Metadata struct{ Labels map[string]string } `json:"metadata"`
	}
	if err := json.Unmarshal(v.Object.Raw, &obj); err != nil {
		t.Fatalf("decode the mutated object %q: %v", v.Object.Raw, err)
	}
	if got := obj.Metadata.Labels["a"]; got != "second/first/0" {
		t.Errorf("label a is %q, want each mutator to have seen the one before: second/first/0", got)
	}
	if len(v.Warnings) != 2 {
		t.Errorf("warnings %q, want one from each mutator", v.Warnings)
	}
}

func TestRefusalsAndFailures(t *testing.T) {
	refusal := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cm", errors.New("no"))
	c, err := New(Config{Synced: func() bool { return true }, Validators: []Validator{refuser{}, refuser{err: refusal}, refuser{err: errors.New("unreachable")}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Validate(context.Background(), write("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Allowed || v.Status == nil || v.Status.Code != http.StatusForbidden || v.Status.Message != refusal.Error() {
		t.Errorf("verdict %+v, want the second step's refusal", v)
	}
	if len(v.Warnings) != 2 {
		t.Errorf("warnings %q, want those of both steps that ran, the refusing one's included", v.Warnings)
	}

	c, err = New(Config{Synced: func() bool { return true }, Validators: []Validator{refuser{err: errors.New("broken")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Validate(context.Background(), write("alice")); err == nil {
		t.Error("a step failing without a status: no error, want the chain to fail")
	}
}

// scoped acts on nothing, and says whether it might.
type scoped struct{ may bool }

func (s scoped) Validate(context.Context, *review.Attributes) (*review.Result, error) {
	return &review.Result{}, nil
}

func (s scoped) MayValidate(*review.Attributes) bool { return s.may }

// TestIdle shows a phase is Idle only when every step says it could not
// act on writes like the one asked about.
func TestIdle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []Validator
		idle  bool
	}{
		{"no step", nil, true},
		{"steps that could not act", []Validator{scoped{}, scoped{}}, true},
		{"one step that could", []Validator{scoped{}, scoped{may: true}}, false},
		{"a step that cannot tell", []Validator{scoped{}, refuser{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{Synced: func() bool { return true }, Validators: tc.steps})
			if err != nil {
				t.Fatal(err)
			}
			v, err := c.Validate(context.Background(), write("alice"))
			if err != nil {
				t.Fatal(err)
			}
			if v.Idle != tc.idle {
				t.Errorf("idle %t, want %t", v.Idle, tc.idle)
			}
		})
	}
}
