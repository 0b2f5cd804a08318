package launcher

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kplane.dev/libs/pki"
)

// writeKubeconfig writes a kubeconfig for server as user, with the CA
// and the user's certificate inline so it works from any directory.
func writeKubeconfig(path, server, user string, ca, client *pki.Cert) error {
	b, err := kubeconfig(server, user, ca, client)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// kubeconfig is a kubeconfig for server as user, with the CA and the
// user's certificate inline.
func kubeconfig(server, user string, ca, client *pki.Cert) ([]byte, error) {
	key, err := client.KeyPEM()
	if err != nil {
		return nil, err
	}
	const name = "kplane"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.CertPEM()}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM(), ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode the kubeconfig of %s: %w", user, err)
	}
	return b, nil
}
