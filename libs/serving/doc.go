// Package serving is what every kplane service does to serve HTTPS: the
// serving flags (--listen-address, --tls-cert-file, --tls-private-key-file,
// --client-ca-file, --shutdown-delay-duration, --shutdown-timeout,
// --log-format), the server they configure, and kube-apiserver's graceful
// shutdown. Tracing (kplane.dev/libs/tracing) is set up here too, so that
// every service takes the same --tracing-* flags. It lives in one place so that the services cannot drift
// apart in how they are run and stopped.
package serving
