package chart

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// listens are the ports each component serves.
var listens = map[string][]int32{
	"gateway": {6443}, "core": {6444}, "authn": {6450}, "authz": {6460}, "crd": {6470}, "admission": {6480},
	"etcd": {2379, 2380}, "nats": {4222, 6222},
}

// edge is a connection one component opens to another's port.
type edge struct {
	from, to string
	port     int32
}

// wantEdges is DESIGN.md's request path: the gateway calls core and crd;
// every service reads the API through the gateway (but the gateway
// itself) and talks over NATS; core and crd store in etcd; etcd and NATS
// members peer. Anyone else may reach the gateway only.
func wantEdges(c chartCase) []edge {
	var e []edge
	e = append(e, edge{"gateway", "core", 6444}, edge{"gateway", "crd", 6470})
	for _, s := range services {
		if s != "gateway" {
			e = append(e, edge{s, "gateway", 6443})
		}
		if c.nats > 0 {
			e = append(e, edge{s, "nats", 4222})
		}
	}
	if c.etcd > 0 {
		e = append(e, edge{"core", "etcd", 2379}, edge{"crd", "etcd", 2379}, edge{"etcd", "etcd", 2380})
	}
	if c.nats > 0 {
		e = append(e, edge{"nats", "nats", 6222})
	}
	return append(e, edge{outsider, "gateway", 6443})
}

// outsider is a pod of the cluster that is no part of kplane.
const outsider = "outsider"

// labelsOf are the labels of a component's pods.
func labelsOf(component string) map[string]string {
	if component == outsider {
		return map[string]string{"app": "something-else"}
	}
	return map[string]string{"app.kubernetes.io/name": "kplane", "app.kubernetes.io/instance": release, "app.kubernetes.io/component": component}
}

// checkReach evaluates the rendered NetworkPolicies for every component
// (and a pod outside kplane) to every port of every component, and
// compares with wantEdges; every component must also reach DNS.
func checkReach(t *testing.T, c chartCase, objs objects) {
	t.Helper()
	var policies []*networkingv1.NetworkPolicy
	for _, o := range objs["NetworkPolicy"] {
		policies = append(policies, o.(*networkingv1.NetworkPolicy))
	}
	components := append(slices.Clone(services), outsider)
	if c.etcd > 0 {
		components = append(components, "etcd")
	}
	if c.nats > 0 {
		components = append(components, "nats")
	}
	want := wantEdges(c)
	for _, from := range components {
		for _, to := range components {
			for _, port := range listens[to] {
				e := edge{from, to, port}
				got := allowed(policies, labelsOf(from), labelsOf(to), corev1.ProtocolTCP, port)
				if w := slices.Contains(want, e); got != w {
					t.Errorf("%s → %s:%d: allowed %v, want %v", from, to, port, got, w)
				}
			}
		}
		dns := map[string]string{"k8s-app": "kube-dns"}
		if from != outsider && !egressAllowed(policies, labelsOf(from), dns, corev1.ProtocolUDP, 53) {
			t.Errorf("%s cannot resolve names: no DNS egress", from)
		}
	}
}

// allowed reports whether the pods' NetworkPolicies let a pod labelled
// from open a connection to a pod of the namespace labelled to, on port.
// The policies are the chart's, all in one namespace: a peer with a
// namespace selector or an IP block is taken to match no pod.
func allowed(policies []*networkingv1.NetworkPolicy, from, to map[string]string, proto corev1.Protocol, port int32) bool {
	return egressAllowed(policies, from, to, proto, port) && ingressAllowed(policies, from, to, proto, port)
}

func egressAllowed(policies []*networkingv1.NetworkPolicy, from, to map[string]string, proto corev1.Protocol, port int32) bool {
	isolated := false
	for _, p := range policies {
		if !selects(p.Spec.PodSelector.MatchLabels, from) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			continue
		}
		isolated = true
		for _, r := range p.Spec.Egress {
			if peersMatch(r.To, to) && portsMatch(r.Ports, proto, port) {
				return true
			}
		}
	}
	return !isolated
}

func ingressAllowed(policies []*networkingv1.NetworkPolicy, from, to map[string]string, proto corev1.Protocol, port int32) bool {
	isolated := false
	for _, p := range policies {
		if !selects(p.Spec.PodSelector.MatchLabels, to) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		isolated = true
		for _, r := range p.Spec.Ingress {
			if peersMatch(r.From, from) && portsMatch(r.Ports, proto, port) {
				return true
			}
		}
	}
	return !isolated
}

// selects is a pod selector's match; an empty one selects every pod.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func peersMatch(peers []networkingv1.NetworkPolicyPeer, labels map[string]string) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.NamespaceSelector != nil || p.IPBlock != nil || p.PodSelector == nil {
			continue
		}
		if len(p.PodSelector.MatchExpressions) == 0 && selects(p.PodSelector.MatchLabels, labels) {
			return true
		}
	}
	return false
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, proto corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pp := corev1.ProtocolTCP
		if p.Protocol != nil {
			pp = *p.Protocol
		}
		if pp != proto {
			continue
		}
		if p.Port == nil || (p.Port.Type == intstr.Int && p.Port.IntVal == port) ||
			(p.EndPort != nil && p.Port.Type == intstr.Int && p.Port.IntVal <= port && port <= *p.EndPort) {
			return true
		}
	}
	return false
}
