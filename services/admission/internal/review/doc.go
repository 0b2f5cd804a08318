// Package review holds what every step of the admission chain reads of
// one write: its attributes, decoded once per review, and their form as
// kube's admission and CEL libraries read them. The webhook dispatcher,
// the CEL policies and the operator's Rego policies all take these, so
// that a write means the same to each of them.
package review
