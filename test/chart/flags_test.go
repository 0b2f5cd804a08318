package chart

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// checkFlags runs the service's binary on args with its check-flags
// subcommand: its own flag set parses them and its own options validate
// them.
func checkFlags(t *testing.T, service string, args []string) error {
	t.Helper()
	bin := filepath.Join(binaries(t), "kplane-"+service)
	out, err := exec.Command(bin, append([]string{"check-flags"}, args...)...).CombinedOutput()
	if err != nil {
		return &flagsError{err: err, out: strings.TrimSpace(string(out))}
	}
	return nil
}

type flagsError struct {
	err error
	out string
}

func (e *flagsError) Error() string { return e.err.Error() + ": " + e.out }

// checkCommandLines: every service's binary accepts its command line.
func checkCommandLines(t *testing.T, objs objects) {
	t.Helper()
	for _, s := range services {
		if err := checkFlags(t, s, container(t, objs, s).Args); err != nil {
			t.Errorf("%s refuses the chart's command line: %v", s, err)
		}
	}
}

// TestCheckFlagsCatchesDrift: a flag the binary does not have, or a
// required one missing, fails the check, so that the check above proves
// something.
func TestCheckFlagsCatchesDrift(t *testing.T) {
	objs := index(render(t, "core: {extraArgs: [--etcd-severs=http://etcd:2379]}\n"))
	err := checkFlags(t, "core", container(t, objs, "core").Args)
	if err == nil || !strings.Contains(err.Error(), "unknown flag: --etcd-severs") {
		t.Errorf("core with a misspelled flag: %v", err)
	}
	args := slices.DeleteFunc(container(t, objs, "gateway").Args, func(a string) bool { return strings.HasPrefix(a, "--tls-cert-file=") })
	if err := checkFlags(t, "gateway", args); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Errorf("gateway without --tls-cert-file: %v", err)
	}
}

// checkBundles: every file a service's flags name is in a Secret its pod
// mounts: its own bundle (with that file in it), or the Secret the values
// name for external etcd or NATS; and the bundles' Secrets are the ones
// the certificate Job may write.
func checkBundles(t *testing.T, c chartCase, objs objects, b bundles) {
	t.Helper()
	for _, s := range services {
		ctr := container(t, objs, s)
		spec := get[*appsv1.Deployment](t, objs, "Deployment", prefix+"-"+s).Spec.Template.Spec
		for _, a := range ctr.Args {
			name, path, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !isFileFlag(name) {
				continue
			}
			if name == "audit-policy-file" {
				checkAuditPolicy(t, objs, ctr, spec.Volumes, path)
				continue
			}
			secret, key, err := secretFile(ctr, spec.Volumes, path)
			if err != nil {
				t.Errorf("%s %s: %v", s, a, err)
				continue
			}
			if secret == c.secretPrefix+"-"+s {
				if _, ok := b[s][key]; !ok {
					t.Errorf("%s %s: the bundle of %s has no %s (it has %v)", s, a, s, key, slices.Sorted(mapKeys(b[s])))
				}
				continue
			}
			if !slices.Contains([]string{"etcd-client", "nats-client", "kplane-nats-creds", "kplane-nats-token"}, secret) {
				t.Errorf("%s %s: file of Secret %s, which is neither its bundle nor one the values name", s, a, secret)
			}
		}
	}
	if !c.job {
		return
	}
	r := get[*rbacv1.Role](t, objs, "Role", prefix+"-certificates")
	var readable []string
	for _, r := range r.Rules {
		readable = append(readable, r.ResourceNames...)
	}
	for _, b := range append(slices.Clone(services), "nats", "admin") {
		if !slices.Contains(readable, c.secretPrefix+"-"+b) {
			t.Errorf("the certificate Job may not read Secret %s-%s, which it writes", c.secretPrefix, b)
		}
	}
}

// secretFile is the Secret and key that path, in a container, is a file
// of.
func secretFile(ctr corev1.Container, volumes []corev1.Volume, path string) (secret, key string, err error) {
	for _, m := range ctr.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Secret == nil {
				return "", "", fmt.Errorf("%s is on volume %s, not a Secret", path, v.Name)
			}
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rel, nil
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return v.Secret.SecretName, it.Key, nil
				}
			}
			return "", "", fmt.Errorf("%s is no item of Secret %s", path, v.Secret.SecretName)
		}
		return "", "", fmt.Errorf("mount %s has no volume", m.Name)
	}
	return "", "", fmt.Errorf("%s is on no volume the container mounts", path)
}

// checkAuditPolicy: the gateway's --audit-policy-file is the policy of
// the chart's ConfigMap, which parses as an audit.k8s.io/v1 Policy.
func checkAuditPolicy(t *testing.T, objs objects, ctr corev1.Container, volumes []corev1.Volume, path string) {
	t.Helper()
	cm := get[*corev1.ConfigMap](t, objs, "ConfigMap", prefix+"-gateway-audit-policy")
	for _, m := range ctr.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range volumes {
			if v.Name == m.Name && (v.ConfigMap == nil || v.ConfigMap.Name != cm.Name) {
				t.Errorf("--audit-policy-file=%s is on volume %s, not ConfigMap %s", path, v.Name, cm.Name)
				return
			}
		}
		policy, ok := cm.Data[rel]
		if !ok {
			t.Errorf("ConfigMap %s has no %s", cm.Name, rel)
			return
		}
		var p struct {
			APIVersion string           `json:"apiVersion"`
			Kind       string           `json:"kind"`
			Rules      []map[string]any `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(policy), &p); err != nil || p.APIVersion != "audit.k8s.io/v1" || p.Kind != "Policy" || len(p.Rules) == 0 {
			t.Errorf("ConfigMap %s holds no audit policy (%v):\n%s", cm.Name, err, policy)
		}
		return
	}
	t.Errorf("--audit-policy-file=%s is on no volume the gateway mounts", path)
}

// isFileFlag reports whether the flag called name names a file, by the
// services' naming: --tls-cert-file, --etcd-cafile, --kubeconfig,
// --nats-creds.
func isFileFlag(name string) bool {
	return strings.HasSuffix(name, "file") || strings.HasSuffix(name, "kubeconfig") || strings.HasSuffix(name, "creds")
}
