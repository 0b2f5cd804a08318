package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"kplane.dev/deploy/launcher"
	"kplane.dev/proto/access"
)

// checkNATSConfig loads the bundled NATS's configuration as its pods see
// it (the ConfigMap beside the users of Secret <prefix>-nats, from the
// nats bundle b) with
// nats-server's own parser: the users are kplane's services, JetStream
// is on, and members route to each other.
func checkNATSConfig(t *testing.T, c chartCase, objs objects, b bundles) {
	t.Helper()
	ss := get[*appsv1.StatefulSet](t, objs, "StatefulSet", prefix+"-nats")
	cm := get[*corev1.ConfigMap](t, objs, "ConfigMap", prefix+"-nats")
	spec := ss.Spec.Template.Spec
	if args := spec.Containers[0].Args; len(args) != 1 || args[0] != "--config=/etc/nats/nats.conf" {
		t.Fatalf("nats-server arguments %q", args)
	}
	var sources []corev1.VolumeProjection
	for _, v := range spec.Volumes {
		if v.Name == "config" && v.Projected != nil {
			sources = v.Projected.Sources
		}
	}
	dir := t.TempDir()
	var fromConfigMap, fromSecret bool
	for _, s := range sources {
		switch {
		case s.ConfigMap != nil && s.ConfigMap.Name == cm.Name:
			for name, data := range cm.Data {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			fromConfigMap = true
		case s.Secret != nil && s.Secret.Name == c.secretPrefix+"-nats":
			for _, it := range s.Secret.Items {
				data, ok := b[launcher.NATSBundle][it.Key]
				if !ok {
					t.Fatalf("Secret %s has no key %s: the nats bundle has %v", s.Secret.Name, it.Key, slices.Sorted(mapKeys(b[launcher.NATSBundle])))
				}
				if err := os.WriteFile(filepath.Join(dir, it.Path), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			fromSecret = true
		}
	}
	if !fromConfigMap || !fromSecret {
		t.Fatalf("the configuration volume projects %+v: want ConfigMap %s and Secret %s-nats", sources, cm.Name, c.secretPrefix)
	}
	t.Setenv("POD_NAME", prefix+"-nats-0")
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("nats-server refuses the configuration: %v\n%s", err, cm.Data["nats.conf"])
	}
	if opts.ServerName != prefix+"-nats-0" || opts.Port != 4222 || !opts.JetStream || opts.StoreDir != "/data" || opts.HTTPPort != 8222 {
		t.Errorf("nats-server options: name %q, port %d, JetStream %v in %q, monitoring on %d", opts.ServerName, opts.Port, opts.JetStream, opts.StoreDir, opts.HTTPPort)
	}
	if got, want := len(opts.Nkeys), len(access.Services()); got != want {
		t.Errorf("%d NKey users, want one per service (%d)", got, want)
	}
	routes := 0
	for _, r := range opts.Routes {
		if !strings.HasSuffix(r.Host, "."+prefix+"-nats-peers."+namespace+".svc:6222") {
			t.Errorf("route %s is no member's", r)
		}
		routes++
	}
	if want := int(c.nats); (want > 1 && (routes != want || opts.Cluster.Port != 6222)) || (want == 1 && routes != 0) {
		t.Errorf("%d routes on cluster port %d for %d members", routes, opts.Cluster.Port, want)
	}
}
