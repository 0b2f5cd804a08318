package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/tracing"
)

// defaultTimeout is what the API server defaults timeoutSeconds to.
const defaultTimeout = 10 * time.Second

// maxResponse bounds what is read of a webhook's answer, so that a
// broken webhook cannot exhaust memory.
const maxResponse = 3 << 20

// client is the HTTPS client of the webhooks that share a CA bundle and
// host, so that their connections are reused across writes.
type client struct {
	http *http.Client
}

type clients struct {
	resolver Resolver
	tracing  *tracing.Provider
	mu       sync.Mutex
	byKey    map[string]*client
}

// target is where a webhook is called: the URL kube shows in its errors
// and, for a service, the service it names.
type target struct {
	url     *url.URL
	service *admissionregistrationv1.ServiceReference
}

func webhookTarget(cc admissionregistrationv1.WebhookClientConfig) (*target, error) {
	if cc.URL != nil {
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return nil, fmt.Errorf("parsing the webhook URL: %w", err)
		}
		return &target{url: u}, nil
	}
	s := cc.Service
	if s == nil {
		return nil, errors.New("the webhook has neither a URL nor a service")
	}
	port := int32(443)
	if s.Port != nil {
		port = *s.Port
	}
	u := &url.URL{Scheme: "https", Host: net.JoinHostPort(serviceHost(s), strconv.Itoa(int(port)))}
	if s.Path != nil {
		u.Path = *s.Path
	}
	return &target{url: u, service: s}, nil
}

// serviceHost is the name a service's serving certificate is issued for.
func serviceHost(s *admissionregistrationv1.ServiceReference) string {
	return s.Name + "." + s.Namespace + ".svc"
}

func (cs *clients) get(cc admissionregistrationv1.WebhookClientConfig, t *target) (*client, error) {
	key := string(cc.CABundle) + "\x00" + t.url.Host
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.byKey[key]; ok {
		return c, nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cc.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cc.CABundle) {
			return nil, errors.New("the webhook's caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	var rt http.RoundTripper = &http.Transport{
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: defaultTimeout,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
	}
	if t.service != nil {
		if cs.resolver == nil {
			return nil, errors.New("the webhook names a service and there is no service resolver")
		}
		tlsConfig.ServerName = serviceHost(t.service)
		rt = &resolving{service: *t.service, resolver: cs.resolver, next: rt}
	}
	c := &client{http: &http.Client{Transport: cs.tracing.Transport(rt)}}
	cs.byKey[key] = c
	return c, nil
}

// resolving sends a request for a service to the endpoint the resolver
// gives at the time, while the request's URL (and so kube's error
// messages) and Host header keep naming the service, as kube's do.
type resolving struct {
	service  admissionregistrationv1.ServiceReference
	resolver Resolver
	next     http.RoundTripper
}

func (r *resolving) RoundTrip(req *http.Request) (*http.Response, error) {
	port := int32(443)
	if r.service.Port != nil {
		port = *r.service.Port
	}
	u, err := r.resolver.ResolveEndpoint(r.service.Namespace, r.service.Name, port)
	if err != nil {
		return nil, fmt.Errorf("resolving service %s/%s: %w", r.service.Namespace, r.service.Name, err)
	}
	out := req.Clone(req.Context())
	out.URL.Host = u.Host
	return r.next.RoundTrip(out)
}

// post sends body to the webhook as kube's REST client does, with the
// time left in a ?timeout= parameter, and returns its answer. Its errors
// read as the REST client's: the url.Error of a failed call, or the
// status error kube makes of a non-2xx answer.
func (c *client) post(ctx context.Context, t *target, body []byte) ([]byte, error) {
	u := *t.url
	if deadline, ok := ctx.Deadline(); ok {
		if timeout := time.Until(deadline); timeout > 0 {
			// kube rounds the timeout it tells the webhook up to seconds.
			if truncated := timeout.Truncate(time.Second); truncated != timeout {
				timeout = truncated + time.Second
			}
			q := u.Query()
			q.Set("timeout", timeout.String())
			u.RawQuery = q.Encode()
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("reading the webhook's answer: %w", err)
	}
	if resp.StatusCode < http.StatusOK || resp.StatusCode > http.StatusPartialContent {
		return nil, apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodPost, schema.GroupResource{}, "", string(data), 0, true)
	}
	return data, nil
}
