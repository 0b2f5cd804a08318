package launcher

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes the admin's kubeconfig for server, with the CA
// and the admin's certificate inline so it works from any directory.
func writeKubeconfig(path, server string, certs *certificates) error {
	key, err := certs.admin.KeyPEM()
	if err != nil {
		return err
	}
	const name = "kplane"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: certs.ca.CertPEM()}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: certs.admin.CertPEM(), ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: AdminUser, Namespace: "default"}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write admin kubeconfig: %w", err)
	}
	return nil
}
