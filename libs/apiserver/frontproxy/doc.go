// Package frontproxy owns the identity a front proxy hands on, in both
// directions, so that what the gateway writes and what a backend reads
// cannot drift apart.
//
// The gateway authenticates and authorizes every request, strips whatever
// identity the client sent (X-Remote-*, Impersonate-*, Authorization) and
// writes the caller's in X-Remote-User, X-Remote-Uid, X-Remote-Group and
// X-Remote-Extra-<key> (SetHeaders), then calls the backend over TLS with
// its own client certificate. A storage service (Authenticator) believes
// those headers only from a certificate that chains to the front proxy's
// CA and carries one of the allowed names as its CN, as kube-apiserver's
// requestheader authenticator does; every other request is refused with
// 401 Unauthorized, and the headers never reach the service's handlers.
// Headers reads the same headers under the names kube's
// --requestheader-*-headers flags give, for the gateway's own
// request-header authentication, and VerifyClient is the one client
// certificate check every service uses.
//
// The service's own controllers reach it without TLS through Loopback, an
// http.RoundTripper that calls the handler in process with a fixed
// identity.
package frontproxy
