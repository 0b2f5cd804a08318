// Package oidctest is a small OpenID Connect issuer for tests: an HTTPS
// server publishing discovery and a JSON Web Key Set, which signs ID tokens
// and can rotate its signing key.
package oidctest
