// Package corev1 holds the strategies of the core/v1 kinds core stores
// besides namespaces: ConfigMaps, Secrets, ServiceAccounts and Events.
// Each defaults and validates with kube-apiserver's rules, field paths and
// messages; object metadata is the REST layer's.
package corev1
