package launcher

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"kplane.dev/libs/natsauth"
)

// Service is one process of the installation.
type Service struct {
	// Name names the service's port flag (--<name>-port), its log file
	// and its pid file.
	Name string
	// Binary is the executable's file name in the binary directory.
	Binary string
	// Port is the default port the service listens on.
	Port int
	// Args are text/template strings expanded with an Env; an argument
	// that expands to nothing is left out, so optional flags are written
	// {{if .X}}--flag={{.X}}{{end}}.
	Args []string
	// ProbeAsAdmin presents the admin client certificate to /readyz, for
	// services that verify every caller.
	ProbeAsAdmin bool
	// Scalable services may run as several processes (--<name>-replicas)
	// on consecutive ports from their port; ReplicaName names them.
	Scalable bool
	// ReadyLast services are started in order but waited for after the
	// rest: their readiness needs services started after them.
	ReadyLast bool
	// Identity, for a service that calls the API, is who it is: the
	// launcher issues it a client certificate and writes
	// ServiceKubeconfig(data, name) pointing at the public service.
	Identity *Identity
}

// Identity is a client certificate's user and groups.
type Identity struct {
	User   string
	Groups []string
}

// ReplicaName is the name of replica i of n of the service called name:
// its log and pid files. A service of one replica keeps its own name.
func ReplicaName(name string, i, n int) string {
	if n == 1 {
		return name
	}
	return name + "-" + strconv.Itoa(i)
}

// Env is what argument templates see.
type Env struct {
	// PKI is the directory of the certificates (see certificate names in
	// pki.go); Data is the data directory.
	PKI, Data string
	// Ports are the services' ports by name: a scalable service's first
	// replica's.
	Ports map[string]int
	// Replicas are the numbers of processes of scalable services by name;
	// a service not named runs one.
	Replicas map[string]int
	// Replica is the index of the process being expanded among its
	// service's replicas.
	Replica int
	// EtcdServers are etcd's client URLs, comma separated.
	EtcdServers string
	NATSURL     string
	// NATSKeys is the directory of the services' NKey seeds
	// (kplane.dev/libs/natsauth) when the embedded NATS runs.
	NATSKeys string
	// NATSTokenFile holds the token of an external NATS.
	NATSTokenFile string
	// Running are the names of the services this launcher runs
	// (--services).
	Running []string
}

// Runs reports whether the service called name runs with this launcher:
// {{if .Runs "admission"}}.
func (e Env) Runs(name string) bool { return slices.Contains(e.Running, name) }

// NKeyFile is the NKey seed file of the service called name, or nothing
// without NATSKeys; templates call it as {{.NKeyFile "core"}}.
func (e Env) NKeyFile(name string) string {
	if e.NATSKeys == "" {
		return ""
	}
	return natsauth.Files{Dir: e.NATSKeys}.Seed(name)
}

// Port is the port of the service called name; templates call it as
// {{.Port "core"}}.
func (e Env) Port(name string) (int, error) {
	p, ok := e.Ports[name]
	if !ok {
		return 0, fmt.Errorf("no service %q", name)
	}
	return p, nil
}

// ReplicaPort is the port of the process being expanded when it is a
// replica of the service called name: a service's own listen address is
// {{.ReplicaPort "core"}}.
func (e Env) ReplicaPort(name string) (int, error) {
	p, err := e.Port(name)
	if err != nil {
		return 0, err
	}
	return p + e.Replica, nil
}

// URLs are the https URLs of every replica of the service called name,
// comma separated: {{.URLs "core"}}.
func (e Env) URLs(name string) (string, error) {
	p, err := e.Port(name)
	if err != nil {
		return "", err
	}
	urls := make([]string, 0, max(e.Replicas[name], 1))
	for i := range max(e.Replicas[name], 1) {
		urls = append(urls, "https://127.0.0.1:"+strconv.Itoa(p+i))
	}
	return strings.Join(urls, ","), nil
}

// Expand returns s's arguments for e.
func (s Service) Expand(e Env) ([]string, error) {
	args := make([]string, 0, len(s.Args))
	for _, a := range s.Args {
		t, err := template.New(s.Name).Option("missingkey=error").Parse(a)
		if err != nil {
			return nil, fmt.Errorf("parse argument %q of %s: %w", a, s.Name, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, e); err != nil {
			return nil, fmt.Errorf("expand argument %q of %s: %w", a, s.Name, err)
		}
		if v := strings.TrimSpace(b.String()); v != "" {
			args = append(args, v)
		}
	}
	return args, nil
}

// PublicService is the service the admin kubeconfig points at.
const PublicService = "gateway"

// Services are kplane's services in start order; they stop in reverse.
// A service's backends come before it, so that it is ready when it first
// answers. authn and authz come after the gateway although it asks them:
// they read the API through the gateway (as members of system:masters,
// which the gateway admits without asking authz), and until they answer,
// the gateway admits only system:masters and refuses others with 503.
func Services() []Service {
	return []Service{
		{
			// Admission comes first: core's and crd's writes, their own
			// at start included, ask it. It is ready once it has read
			// the webhooks and policies through the gateway, so it is
			// waited for last; until then it admits only core's and
			// crd's own writes.
			Name:      "admission",
			Binary:    "kplane-admission",
			Port:      6480,
			Scalable:  true,
			ReadyLast: true,
			Identity:  &Identity{User: "system:kplane-admission", Groups: []string{AdminGroup}},
			Args: []string{
				"{{if .Runs \"gateway\"}}--kubeconfig={{.Data}}/admission.kubeconfig{{end}}",
				"--admission-policy-dir={{.Data}}/admission-policies",
				"--listen-address=127.0.0.1:{{.ReplicaPort \"admission\"}}",
				"--tls-cert-file={{.PKI}}/admission.crt",
				"--tls-private-key-file={{.PKI}}/admission.key",
				"--client-ca-file={{.PKI}}/ca.crt",
				"{{if .NATSURL}}--nats-url={{.NATSURL}}{{end}}",
				"{{with .NKeyFile \"admission\"}}--nats-nkey-file={{.}}{{end}}",
				"{{if .NATSTokenFile}}--nats-token-file={{.NATSTokenFile}}{{end}}",
			},
		},
		{
			Name:     "core",
			Binary:   "kplane-core",
			Port:     6444,
			Scalable: true,
			// Core's controllers (garbage collector, namespace deleter)
			// act through the gateway, so they see every group, custom
			// resources included.
			Identity: &Identity{User: "system:kplane-core", Groups: []string{AdminGroup}},
			Args: []string{
				"--listen-address=127.0.0.1:{{.ReplicaPort \"core\"}}",
				"--tls-cert-file={{.PKI}}/core.crt",
				"--tls-private-key-file={{.PKI}}/core.key",
				"--client-ca-file={{.PKI}}/ca.crt",
				"--etcd-servers={{.EtcdServers}}",
				"--api-kubeconfig={{.Data}}/core.kubeconfig",
				"{{if .NATSURL}}--nats-url={{.NATSURL}}{{end}}",
				"{{if and .NATSURL (.Runs \"admission\")}}--admission{{end}}",
				"{{with .NKeyFile \"core\"}}--nats-nkey-file={{.}}{{end}}",
				"{{if .NATSTokenFile}}--nats-token-file={{.NATSTokenFile}}{{end}}",
			},
		},
		{
			Name:     "crd",
			Binary:   "kplane-crd",
			Port:     6470,
			Scalable: true,
			Identity: &Identity{User: "system:kplane-crd", Groups: []string{AdminGroup}},
			Args: []string{
				"--listen-address=127.0.0.1:{{.ReplicaPort \"crd\"}}",
				"--tls-cert-file={{.PKI}}/crd.crt",
				"--tls-private-key-file={{.PKI}}/crd.key",
				"--client-ca-file={{.PKI}}/ca.crt",
				"--etcd-servers={{.EtcdServers}}",
				"--api-kubeconfig={{.Data}}/crd.kubeconfig",
				"{{if .NATSURL}}--nats-url={{.NATSURL}}{{end}}",
				"{{if and .NATSURL (.Runs \"admission\")}}--admission{{end}}",
				"{{with .NKeyFile \"crd\"}}--nats-nkey-file={{.}}{{end}}",
				"{{if .NATSTokenFile}}--nats-token-file={{.NATSTokenFile}}{{end}}",
			},
		},
		{
			Name:   "gateway",
			Binary: "kplane-gateway",
			Port:   6443,
			Args: []string{
				"--listen-address=127.0.0.1:{{.Port \"gateway\"}}",
				"--tls-cert-file={{.PKI}}/gateway.crt",
				"--tls-private-key-file={{.PKI}}/gateway.key",
				"--client-ca-file={{.PKI}}/ca.crt",
				"--proxy-client-cert-file={{.PKI}}/front-proxy-client.crt",
				"--proxy-client-key-file={{.PKI}}/front-proxy-client.key",
				"--backend-ca-file={{.PKI}}/ca.crt",
				"--core-url={{.URLs \"core\"}}",
				"--crd-url={{.URLs \"crd\"}}",
				"{{if .NATSURL}}--nats-url={{.NATSURL}}{{end}}",
				"{{with .NKeyFile \"gateway\"}}--nats-nkey-file={{.}}{{end}}",
				"{{if .NATSTokenFile}}--nats-token-file={{.NATSTokenFile}}{{end}}",
				"--audit-policy-file={{.Data}}/audit-policy.yaml",
				"--audit-log-path={{.Data}}/logs/audit.log",
				"--audit-log-maxsize=100",
				"--audit-log-maxbackup=5",
			},
			ProbeAsAdmin: true,
		},
		{
			Name:     "authn",
			Binary:   "kplane-authn",
			Port:     6450,
			Scalable: true,
			Identity: &Identity{User: "system:kplane-authn", Groups: []string{AdminGroup}},
			Args: []string{
				"--listen-address=127.0.0.1:{{.ReplicaPort \"authn\"}}",
				"--tls-cert-file={{.PKI}}/authn.crt",
				"--tls-private-key-file={{.PKI}}/authn.key",
				"--client-ca-file={{.PKI}}/ca.crt",
				"--kubeconfig={{.Data}}/authn.kubeconfig",
				"--service-account-signing-key-file={{.PKI}}/sa.key",
				"--service-account-key-file={{.PKI}}/sa.pub",
				"{{if .NATSURL}}--nats-url={{.NATSURL}}{{end}}",
				"{{with .NKeyFile \"authn\"}}--nats-nkey-file={{.}}{{end}}",
				"{{if .NATSTokenFile}}--nats-token-file={{.NATSTokenFile}}{{end}}",
			},
			ProbeAsAdmin: true,
		},
		{
			Name:     "authz",
			Binary:   "kplane-authz",
			Port:     6460,
			Scalable: true,
			Identity: &Identity{User: "system:kplane-authz", Groups: []string{AdminGroup}},
			Args: []string{
				"--listen-address=127.0.0.1:{{.ReplicaPort \"authz\"}}",
				"--tls-cert-file={{.PKI}}/authz.crt",
				"--tls-private-key-file={{.PKI}}/authz.key",
				"--client-ca-file={{.PKI}}/ca.crt",
				"--kubeconfig={{.Data}}/authz.kubeconfig",
				"--authorization-policy-dir={{.Data}}/policies",
				"{{if .NATSURL}}--nats-url={{.NATSURL}}{{end}}",
				"{{with .NKeyFile \"authz\"}}--nats-nkey-file={{.}}{{end}}",
				"{{if .NATSTokenFile}}--nats-token-file={{.NATSTokenFile}}{{end}}",
			},
			ProbeAsAdmin: true,
		},
	}
}
