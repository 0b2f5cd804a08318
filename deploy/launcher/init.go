package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"kplane.dev/libs/natsauth"
)

// File names in a bundle: what a service's flags name under the folder a
// bundle is mounted at, and the keys of the Secret it becomes.
const (
	BundleCA             = "ca.crt"
	BundleCert           = "tls.crt"
	BundleKey            = "tls.key"
	BundleKubeconfig     = "kubeconfig"
	BundleNKey           = "nats.nkey"
	BundleProxyCert      = "proxy-client.crt"
	BundleProxyKey       = "proxy-client.key"
	BundleSigningKey     = "sa.key"
	BundleVerifyKey      = "sa.pub"
	BundleNATSAuthConfig = "auth.conf"
)

// Bundles other than the services'.
const (
	// NATSBundle holds the NATS server's authorization configuration.
	NATSBundle = "nats"
	// AdminBundle holds the admin kubeconfig.
	AdminBundle = "admin"
)

// HostnamePlaceholder, in an InitOptions hostname, stands for the
// service's name.
const HostnamePlaceholder = "{service}"

// InitOptions say what Init issues for an installation whose services run
// apart, in containers or pods, instead of under the launcher.
type InitOptions struct {
	// DataDir keeps the CA, the keys and the NATS seeds; Init run again
	// on it reissues only what is missing, expired or no longer valid for
	// the hostnames.
	DataDir string
	// Server is the gateway's URL as the services reach it, which their
	// kubeconfigs name; AdminServer, as the admin reaches it.
	Server, AdminServer string
	// Hostnames are the names each service's serving certificate is valid
	// for besides the loopback ones; HostnamePlaceholder in one stands
	// for the service's name.
	Hostnames []string
	// GatewayHostnames are further names of the gateway: how clients
	// outside reach it.
	GatewayHostnames []string
}

// Bundle is one consumer's files by name.
type Bundle map[string][]byte

// Init issues the installation's certificates, service account key and
// NATS credentials into o.DataDir and returns what each consumer needs,
// by bundle name: one bundle per service (named after it) holding the CA,
// its serving certificate and key, its NATS seed, its kubeconfig when it
// calls the API, and what only it uses (the gateway's front-proxy client
// certificate, authn's signing key); NATSBundle; and AdminBundle. Giving
// each service only its own bundle keeps one service's credentials from
// every other.
func Init(services []Service, o InitOptions) (map[string]Bundle, error) {
	if o.Server == "" || o.AdminServer == "" {
		return nil, errors.New("init: the gateway's URLs are required")
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", o.DataDir, err)
	}
	pkiPath := filepath.Join(o.DataDir, pkiDir)
	certs, err := issue(pkiPath, services, func(service string) []string {
		var hosts []string
		for _, h := range o.Hostnames {
			hosts = append(hosts, strings.ReplaceAll(h, HostnamePlaceholder, service))
		}
		if service == PublicService {
			hosts = append(hosts, o.GatewayHostnames...)
		}
		return hosts
	})
	if err != nil {
		return nil, err
	}
	auth, err := NATSAuth(o.DataDir)
	if err != nil {
		return nil, err
	}
	read := func(b Bundle, name, path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		b[name] = data
		return nil
	}
	bundles := map[string]Bundle{}
	for _, s := range services {
		b := Bundle{BundleCA: certs.ca.CertPEM()}
		files := certs.dir.Files(s.Name)
		if err := read(b, BundleCert, files.Cert); err != nil {
			return nil, err
		}
		if err := read(b, BundleKey, files.Key); err != nil {
			return nil, err
		}
		if err := read(b, BundleNKey, natsauth.Files{Dir: auth.Dir}.Seed(s.Name)); err != nil {
			return nil, err
		}
		if s.Identity != nil {
			if b[BundleKubeconfig], err = kubeconfig(o.Server, s.Identity.User, certs.ca, certs.clients[s.Name]); err != nil {
				return nil, err
			}
		}
		switch s.Name {
		case PublicService:
			proxy := certs.dir.Files(frontProxyCert)
			if err := read(b, BundleProxyCert, proxy.Cert); err != nil {
				return nil, err
			}
			if err := read(b, BundleProxyKey, proxy.Key); err != nil {
				return nil, err
			}
		case "authn":
			if err := read(b, BundleSigningKey, filepath.Join(pkiPath, serviceAccountKey+".key")); err != nil {
				return nil, err
			}
			if err := read(b, BundleVerifyKey, filepath.Join(pkiPath, serviceAccountKey+".pub")); err != nil {
				return nil, err
			}
		}
		bundles[s.Name] = b
	}
	nats := Bundle{}
	if err := read(nats, BundleNATSAuthConfig, auth.Config()); err != nil {
		return nil, err
	}
	bundles[NATSBundle] = nats
	admin, err := kubeconfig(o.AdminServer, AdminUser, certs.ca, certs.admin)
	if err != nil {
		return nil, err
	}
	bundles[AdminBundle] = Bundle{BundleKubeconfig: admin}
	return bundles, nil
}

// public reports whether the file called name of a bundle may be read by
// anyone: certificates and public keys may, keys and credentials not.
func public(name string) bool {
	return slices.Contains([]string{BundleCA, BundleCert, BundleProxyCert, BundleVerifyKey}, name)
}

// Export writes each bundle to dir/<bundle name>/<file name>, replacing
// what is there, and hands what it writes to owner (uid, gid) unless
// owner is nil: a step that runs as root and exports to volumes whose
// services run as another user.
func Export(dir string, bundles map[string]Bundle, owner *[2]int) error {
	for name, b := range bundles {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		if err := chown(d, owner); err != nil {
			return err
		}
		for file, data := range b {
			mode := os.FileMode(0o600)
			if public(file) {
				mode = 0o644
			}
			if err := writeFileAtomic(filepath.Join(d, file), data, mode, owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFileAtomic replaces path with data, so that a service reading it
// while Init runs again sees the old file or the new one, never half.
func writeFileAtomic(path string, data []byte, mode os.FileMode, owner *[2]int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := chown(tmp.Name(), owner); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func chown(path string, owner *[2]int) error {
	if owner == nil {
		return nil
	}
	if err := os.Chown(path, owner[0], owner[1]); err != nil {
		return fmt.Errorf("hand %s to %d:%d: %w", path, owner[0], owner[1], err)
	}
	return nil
}

// WriteAdminKubeconfig writes the admin kubeconfig to path, owned by the
// owner of path's folder: a folder of the user's mounted into a container
// that runs as root, whose file the user must be able to read.
func WriteAdminKubeconfig(path string, b Bundle) error {
	owner, err := folderOwner(filepath.Dir(path))
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b[BundleKubeconfig], 0o600, owner)
}
