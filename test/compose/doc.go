// Package compose proves docker-compose.yml runs kplane as it promises:
// every service comes up healthy from the images, the kubectl suite
// passes against the published gateway, and under a steady load of reads
// and writes kplane survives scaling, killed replicas, restarted etcd and
// NATS and a core replica cut off the network, losing no acknowledged
// write, staying linearizable (checked with porcupine), and keeping
// watches and informers complete. `docker compose down -v` then leaves
// nothing behind.
//
// The tests of the running system carry the build tag compose and need a
// Docker engine and the images of `make images`; `make compose-test` builds
// both and runs them. The test of the linearizability model itself runs in
// `make test`.
package compose
