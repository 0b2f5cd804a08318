// Package availability keeps the Available condition of every APIService
// as kube-aggregator's availability controllers do: a local APIService
// (served by core or crd) is Available with reason "Local"; for the others
// it probes the resolved service with a GET of its discovery document,
// /apis/<group>/<version>, and writes Available True ("Passed") or False
// with kube's reasons and messages through the apiservices/status
// subresource.
//
// It runs on every gateway replica: the gateway has no etcd to elect a
// leader with, and a replica writes only when the condition it sees
// differs from the stored one, so replicas that agree write nothing and a
// write that lost a race to another replica is a conflict retried on the
// next round.
package availability
