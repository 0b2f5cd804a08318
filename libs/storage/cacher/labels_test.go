package cacher

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestLabelHashes: an object is passed over only when it lacks a label a
// selector requires by equality; any other requirement, and an object
// with more labels than an entry keeps, leave it to be read.
func TestLabelHashes(t *testing.T) {
	withLabels := func(ls map[string]string) labelHashes {
		return hashLabels(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: ls}})
	}
	two := withLabels(map[string]string{"app": "x", "tier": "web"})
	many := withLabels(map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"})
	none := withLabels(nil)
	for _, tt := range []struct {
		selector      string
		two, many, no bool
	}{
		{"", true, true, true},
		{"app=x", true, true, false},
		{"app=y", false, true, false},
		{"app==x,tier=web", true, true, false},
		{"app=x,tier=db", false, true, false},
		{"app in (x)", true, true, false},
		{"app in (y,z)", true, true, true},
		{"app!=x", true, true, true},
		{"app", true, true, true},
		{"!app", true, true, true},
		{"x=app", false, true, false},
	} {
		sel, err := labels.Parse(tt.selector)
		if err != nil {
			t.Fatal(err)
		}
		need := requiredLabels(sel)
		if got := two.mayMatch(need); got != tt.two {
			t.Errorf("%q on {app: x, tier: web}: %v, want %v", tt.selector, got, tt.two)
		}
		if got := many.mayMatch(need); got != tt.many {
			t.Errorf("%q on five labels: %v, want %v", tt.selector, got, tt.many)
		}
		if got := none.mayMatch(need); got != tt.no {
			t.Errorf("%q on no labels: %v, want %v", tt.selector, got, tt.no)
		}
	}
}
