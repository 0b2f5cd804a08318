package apifixture

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/apiserver/resource"
)

// Start serves the kinds authn reads until the test ends.
func Start(t testing.TB) *apitest.Server {
	t.Helper()
	v1 := corev1.SchemeGroupVersion
	return apitest.Start(t, apitest.Options{Resources: []*resource.Resource{
		apitest.Typed(t, v1.WithResource("serviceaccounts"), "ServiceAccount", true),
		apitest.Typed(t, v1.WithResource("secrets"), "Secret", true),
		apitest.Typed(t, v1.WithResource("pods"), "Pod", true),
		apitest.Typed(t, v1.WithResource("nodes"), "Node", false),
	}})
}
