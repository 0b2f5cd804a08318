package chart

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// prefix is the resources' name prefix for release kp.
const prefix = release + "-kplane"

// chartCase is one set of values and what it must render.
type chartCase struct {
	name   string
	values string
	// replicas are the Deployments' replica counts by service; a service
	// not listed has the default, 2. An autoscaled service has none.
	replicas map[string]int32
	// autoscaled are the HPAs' bounds by service.
	autoscaled map[string][2]int32
	// etcd and nats are the bundled members; 0 is external.
	etcd, nats int32
	// secretPrefix names the bundle Secrets.
	secretPrefix string
	// job: the certificate Job runs.
	job bool
	// noNetworkPolicy: networkPolicy.enabled is false.
	noNetworkPolicy bool
	// adminServer is certificates.adminServer.
	adminServer string
	// natsTLS: the services speak TLS to an external NATS and present a
	// client certificate.
	natsTLS bool
	// traced: every service sends spans to an OTLP endpoint.
	traced bool
	// audited: the gateway audits by the chart's policy.
	audited bool
}

// cases are the matrix of values the chart must render correctly.
var cases = []chartCase{
	{name: "defaults", etcd: 1, nats: 1, secretPrefix: prefix, job: true},
	{
		name: "external etcd and NATS",
		values: `
etcd:
  mode: external
  external:
    endpoints: [https://etcd-a.example.net:2379, https://etcd-b.example.net:2379]
    tls:
      existingSecret: etcd-client
nats:
  mode: external
  external:
    url: nats://nats.example.net:4222
    credentials: creds
    existingSecret: kplane-nats-creds
    tls:
      existingSecret: nats-client
      clientCertificate: true
`,
		secretPrefix: prefix, job: true, natsTLS: true,
	},
	{
		name: "external etcd without client certificate and NATS with a token",
		values: `
etcd:
  mode: external
  external:
    endpoints: [http://etcd.example.net:12379]
nats:
  mode: external
  external:
    url: nats://nats.example.net:14222
    credentials: token
    existingSecret: kplane-nats-token
`,
		secretPrefix: prefix, job: true,
	},
	{
		name: "three replicas of everything",
		values: `
gateway: {replicas: 3}
authn: {replicas: 3}
authz: {replicas: 3}
core: {replicas: 3}
crd: {replicas: 3}
admission: {replicas: 3}
etcd: {bundled: {replicas: 3}}
nats: {bundled: {replicas: 3}}
`,
		replicas: map[string]int32{"gateway": 3, "authn": 3, "authz": 3, "core": 3, "crd": 3, "admission": 3},
		etcd:     3, nats: 3, secretPrefix: prefix, job: true,
	},
	{
		name: "autoscaling",
		values: `
gateway: {autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 8}}
authn: {autoscaling: {enabled: true, minReplicas: 1, maxReplicas: 4}}
authz: {autoscaling: {enabled: true, minReplicas: 3, maxReplicas: 12, targetMemoryUtilizationPercentage: 80}}
core: {autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 5}}
crd: {autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 6}}
admission: {autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 7}}
`,
		autoscaled: map[string][2]int32{"gateway": {2, 8}, "authn": {1, 4}, "authz": {3, 12}, "core": {2, 5}, "crd": {2, 6}, "admission": {2, 7}},
		etcd:       1, nats: 1, secretPrefix: prefix, job: true,
	},
	{
		name:     "bundled three-member etcd",
		values:   "etcd: {bundled: {replicas: 3}}\ncore: {replicas: 4}\n",
		replicas: map[string]int32{"core": 4},
		etcd:     3, nats: 1, secretPrefix: prefix, job: true,
	},
	{
		name: "existing certificates, no network policies, public gateway",
		values: `
certificates: {generate: false, secretPrefix: corp-kplane, adminServer: "https://kplane.example.net:443"}
networkPolicy: {enabled: false}
gateway:
  service: {type: LoadBalancer, port: 443, loadBalancerSourceRanges: [10.0.0.0/8]}
`,
		etcd: 1, nats: 1, secretPrefix: "corp-kplane", noNetworkPolicy: true,
	},
	{
		name: "traced and audited",
		values: `
tracing: {endpoint: "http://otel-collector.observability:4318", protocol: http/protobuf, samplingRatePerMillion: 1000}
audit: {enabled: true, stream: true}
`,
		etcd: 1, nats: 1, secretPrefix: prefix, job: true, traced: true, audited: true,
	},
	{
		name: "gateway reached from outside",
		values: `
certificates: {adminServer: "https://kplane.example.net", gatewayHostnames: [203.0.113.7]}
gateway:
  service: {type: LoadBalancer, port: 443}
`,
		etcd: 1, nats: 1, secretPrefix: prefix, job: true, adminServer: "https://kplane.example.net",
	},
}

func TestLint(t *testing.T) {
	if out, err := helm(t, "lint", "--strict", chartDir(t)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if out, err := helm(t, "lint", "--strict", chartDir(t), "--values", valuesFile(t, c.values)); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestRender renders every case and checks what it rendered: each
// service's objects and replicas, the Services' shapes, the security
// defaults, the images, the probes, every command line against its
// binary, the bundle files it names, the NetworkPolicies' reach and the
// NATS configuration.
func TestRender(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := index(render(t, c.values))
			checkInventory(t, c, objs)
			checkReplicas(t, c, objs)
			checkServices(t, objs)
			checkSecurity(t, objs)
			checkImages(t, objs)
			checkProbes(t, objs)
			checkCommandLines(t, objs)
			checkAddresses(t, c, objs)
			b := issued(t, c, objs)
			checkBundles(t, c, objs, b)
			if !c.noNetworkPolicy {
				checkReach(t, c, objs)
			}
			if c.nats > 0 {
				checkNATSConfig(t, c, objs, b)
			}
			checkObservability(t, c, objs)
		})
	}
}

// checkObservability: with tracing, every service is told where to send
// spans; with audit, the gateway audits by the chart's policy to the
// stream, and a changed policy changes its pods.
func checkObservability(t *testing.T, c chartCase, objs objects) {
	t.Helper()
	for _, s := range services {
		traced := slices.ContainsFunc(container(t, objs, s).Args, func(a string) bool { return strings.HasPrefix(a, "--tracing-endpoint=") })
		if traced != c.traced {
			t.Errorf("%s sends traces: %v, want %v", s, traced, c.traced)
		}
	}
	args := container(t, objs, "gateway").Args
	audited := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--audit-policy-file=") })
	if audited != c.audited {
		t.Fatalf("the gateway audits: %v, want %v", audited, c.audited)
	}
	if !c.audited {
		return
	}
	if !slices.Contains(args, "--audit-stream") || !slices.Contains(args, "--audit-log-path=-") {
		t.Errorf("the gateway's audit backends: %q", args)
	}
	pod := get[*appsv1.Deployment](t, objs, "Deployment", prefix+"-gateway").Spec.Template
	if pod.Annotations["checksum/audit-policy"] == "" {
		t.Errorf("the gateway's pods do not change with the audit policy: annotations %v", pod.Annotations)
	}
}

// objects are rendered objects by kind and name.
type objects map[string]map[string]runtime.Object

func index(list []runtime.Object) objects {
	objs := objects{}
	for _, o := range list {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		name := o.(interface{ GetName() string }).GetName()
		if objs[kind] == nil {
			objs[kind] = map[string]runtime.Object{}
		}
		objs[kind][name] = o
	}
	return objs
}

func get[T runtime.Object](t *testing.T, objs objects, kind, name string) T {
	t.Helper()
	o, ok := objs[kind][name]
	if !ok {
		t.Fatalf("no %s %s rendered; have %v", kind, name, names(objs[kind]))
	}
	return o.(T)
}

func names(m map[string]runtime.Object) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// checkInventory: exactly the objects each component needs, no more.
func checkInventory(t *testing.T, c chartCase, objs objects) {
	t.Helper()
	want := map[string][]string{}
	add := func(kind string, names ...string) { want[kind] = append(want[kind], names...) }
	for _, s := range services {
		n := prefix + "-" + s
		add("Deployment", n)
		add("Service", n)
		add("ServiceAccount", n)
		add("PodDisruptionBudget", n)
		if !c.noNetworkPolicy {
			add("NetworkPolicy", n)
		}
		if _, ok := c.autoscaled[s]; ok {
			add("HorizontalPodAutoscaler", n)
		}
	}
	add("Service", prefix+"-gateway-internal")
	if c.etcd > 0 {
		add("StatefulSet", prefix+"-etcd")
		add("Service", prefix+"-etcd-peers")
		add("ServiceAccount", prefix+"-etcd")
		add("PodDisruptionBudget", prefix+"-etcd")
		if !c.noNetworkPolicy {
			add("NetworkPolicy", prefix+"-etcd")
		}
	}
	if c.nats > 0 {
		add("StatefulSet", prefix+"-nats")
		add("Service", prefix+"-nats", prefix+"-nats-peers")
		add("ServiceAccount", prefix+"-nats")
		add("PodDisruptionBudget", prefix+"-nats")
		add("ConfigMap", prefix+"-nats")
		if !c.noNetworkPolicy {
			add("NetworkPolicy", prefix+"-nats")
		}
	}
	if c.audited {
		add("ConfigMap", prefix+"-gateway-audit-policy")
	}
	if c.job {
		add("Job", prefix+"-certificates")
		add("ServiceAccount", prefix+"-certificates")
		add("Role", prefix+"-certificates")
		add("RoleBinding", prefix+"-certificates")
	}
	kinds := map[string]bool{}
	for k := range want {
		kinds[k] = true
	}
	for k := range objs {
		kinds[k] = true
	}
	for k := range kinds {
		w := slices.Sorted(slices.Values(want[k]))
		if got := names(objs[k]); !slices.Equal(got, w) {
			t.Errorf("%s: rendered %v, want %v", k, got, w)
		}
	}
}

// checkReplicas: the replicas and autoscaling bounds of the values.
func checkReplicas(t *testing.T, c chartCase, objs objects) {
	t.Helper()
	for _, s := range services {
		d := get[*appsv1.Deployment](t, objs, "Deployment", prefix+"-"+s)
		if bounds, ok := c.autoscaled[s]; ok {
			if d.Spec.Replicas != nil {
				t.Errorf("%s: autoscaled, yet the Deployment fixes %d replicas, which every upgrade would reset", s, *d.Spec.Replicas)
			}
			h := get[*autoscalingv2.HorizontalPodAutoscaler](t, objs, "HorizontalPodAutoscaler", prefix+"-"+s)
			if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != bounds[0] || h.Spec.MaxReplicas != bounds[1] {
				t.Errorf("%s: HPA bounds %v..%d, want %v", s, h.Spec.MinReplicas, h.Spec.MaxReplicas, bounds)
			}
			if ref := h.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
				t.Errorf("%s: HPA scales %+v", s, ref)
			}
			continue
		}
		want := int32(2)
		if r, ok := c.replicas[s]; ok {
			want = r
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
			t.Errorf("%s: %v replicas, want %d", s, d.Spec.Replicas, want)
		}
	}
	for name, want := range map[string]int32{"etcd": c.etcd, "nats": c.nats} {
		if want == 0 {
			continue
		}
		ss := get[*appsv1.StatefulSet](t, objs, "StatefulSet", prefix+"-"+name)
		if ss.Spec.Replicas == nil || *ss.Spec.Replicas != want {
			t.Errorf("%s: %v members, want %d", name, ss.Spec.Replicas, want)
		}
		if len(ss.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("%s: %d volume claim templates, want one persistent volume per member", name, len(ss.Spec.VolumeClaimTemplates))
		}
	}
	for _, p := range objs["PodDisruptionBudget"] {
		pdb := p.(*policyv1.PodDisruptionBudget)
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want 1", pdb.Name, pdb.Spec.MaxUnavailable)
		}
	}
}

// checkServices: core and crd headless (the gateway spreads over every
// replica the name resolves to), the others with a cluster IP; every
// Service selects pods of its component and targets a port they have.
func checkServices(t *testing.T, objs objects) {
	t.Helper()
	for _, s := range services {
		svc := get[*corev1.Service](t, objs, "Service", prefix+"-"+s)
		headless := svc.Spec.ClusterIP == corev1.ClusterIPNone
		if want := s == "core" || s == "crd"; headless != want {
			t.Errorf("Service %s: headless %v, want %v", svc.Name, headless, want)
		}
	}
	internal := get[*corev1.Service](t, objs, "Service", prefix+"-gateway-internal")
	if !internal.Spec.PublishNotReadyAddresses {
		t.Error("the gateway's internal Service drops unready gateways: authz, authn and admission could never read the API to become ready, nor the gateway become ready without authz")
	}
	for _, o := range objs["Service"] {
		svc := o.(*corev1.Service)
		pods := podsSelectedBy(t, objs, svc.Spec.Selector)
		if len(pods) == 0 {
			t.Errorf("Service %s selects no pods (%v)", svc.Name, svc.Spec.Selector)
			continue
		}
		for _, p := range svc.Spec.Ports {
			for _, spec := range pods {
				if !hasPort(spec, p.TargetPort.String()) {
					t.Errorf("Service %s: target port %s is no port of its pods", svc.Name, p.TargetPort.String())
				}
			}
		}
	}
}

// podsSelectedBy are the pod templates whose labels selector matches.
func podsSelectedBy(t *testing.T, objs objects, selector map[string]string) []corev1.PodSpec {
	t.Helper()
	var specs []corev1.PodSpec
	for _, pt := range podTemplates(objs) {
		if matches(selector, pt.tmpl.Labels) {
			specs = append(specs, pt.tmpl.Spec)
		}
	}
	return specs
}

func hasPort(spec corev1.PodSpec, port string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
				return true
			}
		}
	}
	return false
}

// matches reports whether labels carry every label of selector; an empty
// selector matches nothing here, as a Service's would select nothing.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// podTemplate is a workload's pod template and what it belongs to.
type podTemplate struct {
	owner string
	tmpl  corev1.PodTemplateSpec
}

func podTemplates(objs objects) []podTemplate {
	var pts []podTemplate
	for _, kind := range []string{"Deployment", "StatefulSet", "Job"} {
		for _, name := range names(objs[kind]) {
			var tmpl corev1.PodTemplateSpec
			switch o := objs[kind][name].(type) {
			case *appsv1.Deployment:
				tmpl = o.Spec.Template
			case *appsv1.StatefulSet:
				tmpl = o.Spec.Template
			case *batchv1.Job:
				tmpl = o.Spec.Template
			}
			pts = append(pts, podTemplate{owner: kind + " " + name, tmpl: tmpl})
		}
	}
	return pts
}

// checkSecurity: every pod non-root with RuntimeDefault seccomp, every
// container with a read-only root filesystem, no privilege escalation and
// no capability; no pod but the certificate Job's holds a token of the
// host cluster.
func checkSecurity(t *testing.T, objs objects) {
	t.Helper()
	for _, pt := range podTemplates(objs) {
		spec := pt.tmpl.Spec
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("%s: pod may run as root: %+v", pt.owner, psc)
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod seccomp profile is not RuntimeDefault", pt.owner)
		}
		isJob := strings.HasPrefix(pt.owner, "Job ")
		if token := spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken; token != isJob {
			t.Errorf("%s: mounts a service account token: %v, want %v", pt.owner, token, isJob)
		}
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s/%s: no security context", pt.owner, c.Name)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s/%s: privilege escalation allowed", pt.owner, c.Name)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s/%s: root filesystem writable", pt.owner, c.Name)
			case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
				t.Errorf("%s/%s: capabilities %+v, want all dropped", pt.owner, c.Name, sc.Capabilities)
			case sc.Privileged != nil && *sc.Privileged:
				t.Errorf("%s/%s: privileged", pt.owner, c.Name)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: resources %+v, want CPU and memory requests and a memory limit", pt.owner, c.Name, c.Resources)
			}
		}
	}
	for _, o := range objs["ServiceAccount"] {
		sa := o.(*corev1.ServiceAccount)
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount %s: tokens mounted by default", sa.Name)
		}
	}
}

// checkImages: every image is kplane's, tagged with the chart's
// appVersion.
func checkImages(t *testing.T, objs objects) {
	t.Helper()
	tag := appVersion(t)
	want := map[string]string{"Job " + prefix + "-certificates": "kplane/kplane-up", "StatefulSet " + prefix + "-etcd": "kplane/etcd", "StatefulSet " + prefix + "-nats": "kplane/nats-server"}
	for _, s := range services {
		want["Deployment "+prefix+"-"+s] = "kplane/kplane-" + s
	}
	for _, pt := range podTemplates(objs) {
		for _, c := range pt.tmpl.Spec.Containers {
			if img := want[pt.owner] + ":" + tag; c.Image != img {
				t.Errorf("%s/%s: image %s, want %s", pt.owner, c.Name, c.Image, img)
			}
		}
	}
}

func appVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %q, %v", chart.AppVersion, err)
	}
	return chart.AppVersion
}

// checkProbes: readiness on /readyz over HTTPS on the serving port;
// liveness on /livez, except the gateway's (see gateway-deployment).
func checkProbes(t *testing.T, objs objects) {
	t.Helper()
	for _, s := range services {
		c := container(t, objs, s)
		get := func(p *corev1.Probe) *corev1.HTTPGetAction {
			if p == nil {
				return nil
			}
			return p.HTTPGet
		}
		if r := get(c.ReadinessProbe); r == nil || r.Path != "/readyz" || r.Scheme != corev1.URISchemeHTTPS || r.Port.String() != "https" {
			t.Errorf("%s: readiness probe %+v, want GET /readyz over HTTPS", s, c.ReadinessProbe)
		}
		if s == "gateway" {
			// Anonymous /livez is authorized by authz: liveness asks only
			// that the gateway accepts connections.
			if c.LivenessProbe == nil || c.LivenessProbe.TCPSocket == nil || c.LivenessProbe.TCPSocket.Port.String() != "https" {
				t.Errorf("gateway: liveness probe %+v, want the serving port accepting connections", c.LivenessProbe)
			}
			continue
		}
		if l := get(c.LivenessProbe); l == nil || l.Path != "/livez" || l.Scheme != corev1.URISchemeHTTPS || l.Port.String() != "https" {
			t.Errorf("%s: liveness probe %+v, want GET /livez over HTTPS", s, c.LivenessProbe)
		}
	}
}

// container is a service's container.
func container(t *testing.T, objs objects, service string) corev1.Container {
	t.Helper()
	d := get[*appsv1.Deployment](t, objs, "Deployment", prefix+"-"+service)
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%s: %d containers, want 1", service, n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// flag is the value of --name in args, and whether it is there.
func flag(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "", true
		}
	}
	return "", false
}

// checkAddresses: each service listens on its container port, and what
// it dials names a Service that leads there: the gateway's core and crd
// URLs, every service's NATS URL, core's and crd's etcd servers.
func checkAddresses(t *testing.T, c chartCase, objs objects) {
	t.Helper()
	for _, s := range services {
		ctr := container(t, objs, s)
		listen, _ := flag(ctr.Args, "listen-address")
		_, port, err := net.SplitHostPort(listen)
		if err != nil || len(ctr.Ports) != 1 || strconv.Itoa(int(ctr.Ports[0].ContainerPort)) != port {
			t.Errorf("%s: listens on %q, container ports %+v", s, listen, ctr.Ports)
		}
		for _, f := range []string{"nats-ca-file", "nats-client-cert-file", "nats-client-key-file"} {
			if _, ok := flag(ctr.Args, f); ok != c.natsTLS {
				t.Errorf("%s: --%s given: %v, want %v", s, f, ok, c.natsTLS)
			}
		}
		natsURL, _ := flag(ctr.Args, "nats-url")
		if c.nats > 0 {
			leadsTo(t, objs, s+" --nats-url", natsURL, "nats", "client")
		} else if !strings.HasPrefix(natsURL, "nats://nats.example.net:") {
			t.Errorf("%s: --nats-url=%s, want the external NATS", s, natsURL)
		}
	}
	gw := container(t, objs, "gateway").Args
	for _, backend := range []string{"core", "crd"} {
		u, _ := flag(gw, backend+"-url")
		leadsTo(t, objs, "gateway --"+backend+"-url", u, backend, "https")
	}
	for _, s := range []string{"core", "crd"} {
		servers, _ := flag(container(t, objs, s).Args, "etcd-servers")
		members := strings.Split(servers, ",")
		if c.etcd == 0 {
			continue
		}
		if len(members) != int(c.etcd) {
			t.Errorf("%s: --etcd-servers=%s, want each of %d members", s, servers, c.etcd)
		}
		for i, m := range members {
			u, err := url.Parse(m)
			want := fmt.Sprintf("%s-etcd-%d.%s-etcd-peers.%s.svc:2379", prefix, i, prefix, namespace)
			if err != nil || u.Host != want {
				t.Errorf("%s: etcd server %q, want host %s", s, m, want)
			}
		}
	}
}

// leadsTo checks that rawURL names the Service <prefix>-<component> in
// the release's namespace on a port that targets the component's port
// called portName.
func leadsTo(t *testing.T, objs objects, what, rawURL, component, portName string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Errorf("%s: %q: %v", what, rawURL, err)
		return
	}
	name := prefix + "-" + component
	if u.Hostname() != name+"."+namespace+".svc" {
		t.Errorf("%s: host %q, want the Service %s.%s.svc", what, u.Hostname(), name, namespace)
		return
	}
	svc := get[*corev1.Service](t, objs, "Service", name)
	for _, p := range svc.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == u.Port() && p.TargetPort.String() == portName {
			return
		}
	}
	t.Errorf("%s: port %s of Service %s does not lead to port %s", what, u.Port(), name, portName)
}
