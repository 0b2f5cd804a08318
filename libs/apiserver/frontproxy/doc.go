// Package frontproxy tells a storage service who a request is for. The
// gateway authenticates and authorizes every request, then calls the
// service over TLS with its own client certificate and the caller's
// identity in X-Remote-User, X-Remote-Uid, X-Remote-Group and
// X-Remote-Extra-<key> headers. The service believes those headers only
// from a certificate that chains to the front proxy's CA and, when names
// are configured, carries one of them as its CN, as kube-apiserver's
// requestheader authenticator does; every other request is refused with
// 401 Unauthorized, and the headers never reach the service's handlers.
//
// The service's own controllers reach it without TLS through Loopback, an
// http.RoundTripper that calls the handler in process with a fixed
// identity.
package frontproxy
