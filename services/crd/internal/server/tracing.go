package server

import (
	"net/http"

	"k8s.io/apiserver/pkg/util/webhook"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/tracing"
)

// tracedWebhooks makes the clients of conversion webhooks send the trace
// context of the conversion's request under a client span, as kube's
// authentication info resolver wrapper does when kube traces; without
// tracing they are left as they are.
func tracedWebhooks(tp *tracing.Provider) webhook.AuthenticationInfoResolverWrapper {
	return func(r webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver {
		if !tp.Enabled() {
			return r
		}
		traced := func(cfg *restclient.Config, err error) (*restclient.Config, error) {
			if err != nil {
				return nil, err
			}
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return tp.Transport(rt) })
			return cfg, nil
		}
		return &webhook.AuthenticationInfoResolverDelegator{
			ClientConfigForFunc: func(hostPort string) (*restclient.Config, error) {
				return traced(r.ClientConfigFor(hostPort))
			},
			ClientConfigForServiceFunc: func(name, namespace string, port int) (*restclient.Config, error) {
				return traced(r.ClientConfigForService(name, namespace, port))
			},
		}
	}
}
