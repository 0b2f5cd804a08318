// Package availability keeps the Available condition of every APIService
// as kube-aggregator's availability controllers do: it probes the server
// of each APIService (core for local ones, the resolved service for the
// others) with a GET of its discovery document, /apis/<group>/<version> or
// /api/v1, and writes Available True ("Passed") or False with kube's
// reasons and messages through the apiservices/status subresource.
//
// It runs on every gateway replica: the gateway has no etcd to elect a
// leader with, and a replica writes only when the condition it sees
// differs from the stored one, so replicas that agree write nothing and a
// write that lost a race to another replica is a conflict retried on the
// next round.
package availability
