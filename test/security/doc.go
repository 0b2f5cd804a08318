// Package security is kplane's adversarial suite: it starts the whole
// system as make up does and attacks it as a hostile tenant and as a
// client that breaks the rules of HTTP would — path confusion, verbs
// smuggled in query parameters, creates hidden in applies, forged identity
// headers, requests that bypass the gateway, amplifying patches, huge and
// trickled bodies, slow headers, floods of watches, malformed input on every
// endpoint. Every refusal must be kube-apiserver's status code and reason;
// nothing may answer 500, hang, or grow a process's memory without bound.
//
// Longer fuzzing of the parsers these attacks reach runs with make fuzz.
package security
