package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kplaneload "kplane.dev/deploy/load"
	"kplane.dev/test/e2e/harness"
)

// TestLoadTool runs kplane-load's side-by-side mode briefly against one
// system as both sides: every workload, the custom resources' and the
// list across namespaces included, must do work on both, with sane
// latencies and no errors, and leave no namespace of its own and no CRD
// behind; the memory of the system's processes is sampled for both sides.
// It says nothing about speed, which depends on the machine.
func TestLoadTool(t *testing.T) {
	sys := harness.Start(t)
	o := kplaneload.NewOptions()
	o.Kubeconfig, o.CompareKubeconfig = sys.Kubeconfig, sys.Kubeconfig
	o.Objects, o.ObjectSize, o.Workers, o.Watchers = 40, 256, 4, 5
	// 14, 13 and 13 objects: the lists of the first namespace read 14,
	// list-all-namespaces all 40 of the side and none of the other's.
	o.Namespaces = 3
	o.PageSize = 6 // three pages of the first namespace, two continue tokens
	o.Duration, o.Rounds = 300*time.Millisecond, 2
	// Every process of a system the harness starts names its data
	// directory; one already running may be anywhere.
	local := os.Getenv(harness.ExternalEnv) == ""
	if local {
		o.Processes = regexp.QuoteMeta(sys.DataDir) + `(/|\s|$)`
		o.CompareProcesses = o.Processes
	}
	targets, err := o.Targets()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	report, err := kplaneload.Run(ctx, o, targets, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("kplaneload.Run: %v\n%s", err, logs.String())
	}

	var table bytes.Buffer
	if err := report.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", table.String())
	if len(report.Workloads) != len(kplaneload.WorkloadNames()) {
		t.Errorf("%d workloads reported, want %d (%v)", len(report.Workloads), len(kplaneload.WorkloadNames()), kplaneload.WorkloadNames())
	}
	for _, w := range report.Workloads {
		if !strings.Contains(table.String(), w.Name) {
			t.Errorf("table has no row for %s", w.Name)
		}
		if w.Ratio == nil || *w.Ratio <= 0 {
			t.Errorf("%s: ratio %v, want a positive A/B", w.Name, w.Ratio)
		}
		if len(w.Sides) != 2 {
			t.Fatalf("%s: %d sides, want 2", w.Name, len(w.Sides))
		}
		for _, s := range w.Sides {
			if s.Errors != 0 {
				t.Errorf("%s on %s: %d errors, first: %s", w.Name, s.Target, s.Errors, s.FirstError)
			}
			if len(s.Rounds) != o.Rounds {
				t.Errorf("%s on %s: %d rounds, want %d", w.Name, s.Target, len(s.Rounds), o.Rounds)
			}
			for i, r := range s.Rounds {
				if r.Ops == 0 || r.OpsPerSecond <= 0 {
					t.Errorf("%s on %s round %d: %d ops, %v ops/s; want some", w.Name, s.Target, i+1, r.Ops, r.OpsPerSecond)
				}
				if r.P50Ms <= 0 || r.P50Ms > r.P99Ms || r.P99Ms > time.Minute.Seconds()*1000 {
					t.Errorf("%s on %s round %d: p50 %vms, p99 %vms; want 0 < p50 <= p99 < 1 min", w.Name, s.Target, i+1, r.P50Ms, r.P99Ms)
				}
			}
		}
	}
	if local && len(report.Memory) != 2 {
		t.Fatalf("memory of %d sides, want 2", len(report.Memory))
	}
	for _, m := range report.Memory {
		// kplane-up and its six services.
		if m.Processes != 7 || m.Samples < 2 {
			t.Errorf("memory of %s: %d processes in %d samples, want 7 in at least 2", m.Target, m.Processes, m.Samples)
		}
		for name, st := range map[string]kplaneload.Stat{"RSS": m.RSS, "anon": m.Anon, "PSS": m.PSS} {
			if st.Median <= 0 || st.Median > st.Peak {
				t.Errorf("memory of %s: %s median %v MiB, peak %v MiB; want 0 < median <= peak", m.Target, name, st.Median, st.Peak)
			}
		}
		if m.Anon.Peak > m.RSS.Peak {
			t.Errorf("memory of %s: anonymous peak %v MiB above the RSS peak %v MiB", m.Target, m.Anon.Peak, m.RSS.Peak)
		}
	}
	if local && !strings.Contains(table.String(), "memory in MiB") {
		t.Errorf("table has no memory section")
	}
	var decoded kplaneload.Report
	var out bytes.Buffer
	if err := report.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), &decoded); err != nil || len(decoded.Workloads) != len(report.Workloads) || len(decoded.Memory) != len(report.Memory) {
		t.Errorf("-o json does not read back: %v, %d workloads\n%s", err, len(decoded.Workloads), out.String())
	}

	cfg := sys.RESTConfig(t)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list namespaces: %v", err)
	}
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "kplane-load-") && ns.Status.Phase != corev1.NamespaceTerminating {
			t.Errorf("namespace %s is %s after the run, want it deleted", ns.Name, ns.Status.Phase)
		}
	}
	// Side A made the CRD, side B took it, and A deleted it last; the
	// server may still be deleting it.
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.load.kplane.dev", metav1.GetOptions{})
	if err == nil && crd.DeletionTimestamp == nil {
		t.Errorf("customresourcedefinition %s is still there after the run, want it deleted", crd.Name)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("get the load's customresourcedefinition: %v", err)
	}
}
