// Package review holds what every step of the admission chain reads of
// one write: its attributes, decoded once per review, and their form as
// kube's admission and CEL libraries read them. The webhook dispatcher,
// the CEL policies and the operator's Rego policies all take these, so
// that a write means the same to each of them.
//
// A write carries its equivalents, the other resources its objects are
// served as, and a converter to them: a webhook or policy whose rules
// match only an equivalent under matchPolicy Equivalent sees the write as
// that resource (As), as kube's dispatchers see it, its requestKind and
// requestResource still the client's.
package review
