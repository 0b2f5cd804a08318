// Package authn finds who sent a request to the gateway, as
// kube-apiserver's authenticator union does: the front proxy's request
// headers (from a client certificate of the request-header CA), a client
// certificate of the client CA (CN the user, O the groups), then a bearer
// token (the Authorization header or kube's websocket protocol) reviewed
// by the authn service over NATS, with a short cache of the answers. A
// request with no credentials at all is system:anonymous when anonymous
// requests are enabled; a bad credential is always a 401.
package authn
