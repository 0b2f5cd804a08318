package launcher

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := Env{PKI: "/d/pki", Ports: map[string]int{"core": 7000}, EtcdServers: "http://127.0.0.1:2379"}
	tests := []struct {
		name    string
		args    []string
		env     Env
		want    []string
		wantErr string
	}{
		{
			name: "fields and ports",
			args: []string{"--listen-address=127.0.0.1:{{.Port \"core\"}}", "--tls-cert-file={{.PKI}}/core.crt", "--etcd-servers={{.EtcdServers}}"},
			env:  env,
			want: []string{"--listen-address=127.0.0.1:7000", "--tls-cert-file=/d/pki/core.crt", "--etcd-servers=http://127.0.0.1:2379"},
		},
		{
			name: "an optional flag without a value is left out",
			args: []string{"--a", "{{if .NATSTokenFile}}--nats-token-file={{.NATSTokenFile}}{{end}}", "--b"},
			env:  env,
			want: []string{"--a", "--b"},
		},
		{
			name: "an optional flag with a value is kept",
			args: []string{"{{if .NATSTokenFile}}--nats-token-file={{.NATSTokenFile}}{{end}}"},
			env:  Env{NATSTokenFile: "/d/token"},
			want: []string{"--nats-token-file=/d/token"},
		},
		{
			name: "a service's own NKey seed",
			args: []string{"{{with .NKeyFile \"core\"}}--nats-nkey-file={{.}}{{end}}"},
			env:  Env{NATSKeys: "/d/nats-auth"},
			want: []string{"--nats-nkey-file=/d/nats-auth/core.nk"},
		},
		{
			name: "no NKey seed without the embedded NATS",
			args: []string{"{{with .NKeyFile \"core\"}}--nats-nkey-file={{.}}{{end}}"},
			env:  env,
			want: []string{},
		},
		{
			name: "a replica listens on its own port and the URLs name every replica",
			args: []string{"--listen-address=127.0.0.1:{{.ReplicaPort \"core\"}}", "--core-url={{.URLs \"core\"}}"},
			env:  Env{Ports: map[string]int{"core": 7000}, Replicas: map[string]int{"core": 3}, Replica: 2},
			want: []string{"--listen-address=127.0.0.1:7002", "--core-url=https://127.0.0.1:7000,https://127.0.0.1:7001,https://127.0.0.1:7002"},
		},
		{
			name: "a service without replicas has one URL",
			args: []string{"--core-url={{.URLs \"core\"}}"},
			env:  env,
			want: []string{"--core-url=https://127.0.0.1:7000"},
		},
		{
			name:    "unknown service port",
			args:    []string{"--x={{.Port \"nope\"}}"},
			env:     env,
			wantErr: `no service "nope"`,
		},
		{
			name:    "unknown field",
			args:    []string{"--x={{.Nope}}"},
			env:     env,
			wantErr: "Nope",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Service{Name: "svc", Args: tt.args}.Expand(tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Expand error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Expand = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestServicesExpand checks that every service's templates expand with
// what Run provides, and that each service's port is its own.
func TestServicesExpand(t *testing.T) {
	services := Services()
	ports := map[string]int{}
	for _, s := range services {
		ports[s.Name] = s.Port
	}
	env := Env{PKI: "/p", Data: "/d", Ports: ports, EtcdServers: "http://e", NATSURL: "nats://n", NATSKeys: "/d/nats-auth"}
	for _, s := range services {
		t.Run(s.Name, func(t *testing.T) {
			args, err := s.Expand(env)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"--listen-address=127.0.0.1:" + strconv.Itoa(s.Port), "--nats-nkey-file=/d/nats-auth/" + s.Name + ".nk"} {
				if !slices.Contains(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
		})
	}
	if !slices.ContainsFunc(services, func(s Service) bool { return s.Name == PublicService }) {
		t.Errorf("no %s service among %v", PublicService, services)
	}
}

// TestAdmissionOnlyWhenItRuns: core and crd ask the admission service
// about writes only when it runs with them; without it every write would
// fail and they would never be ready.
func TestAdmissionOnlyWhenItRuns(t *testing.T) {
	for _, running := range [][]string{{"admission", "core", "crd"}, {"core", "crd"}} {
		env := Env{Ports: map[string]int{"core": 1, "crd": 2}, NATSURL: "nats://n", Running: running}
		for _, s := range Services() {
			if s.Name != "core" && s.Name != "crd" {
				continue
			}
			args, err := s.Expand(env)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := slices.Contains(args, "--admission"), slices.Contains(running, "admission"); got != want {
				t.Errorf("%s with %v running: --admission %v, want %v", s.Name, running, got, want)
			}
		}
	}
}

func TestReplicaName(t *testing.T) {
	tests := []struct {
		i, n int
		want string
	}{
		{i: 0, n: 1, want: "core"},
		{i: 0, n: 2, want: "core-0"},
		{i: 1, n: 2, want: "core-1"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := ReplicaName("core", tt.i, tt.n); got != tt.want {
				t.Errorf("ReplicaName(core, %d, %d) = %q, want %q", tt.i, tt.n, got, tt.want)
			}
		})
	}
}
