// Package natsauth gives every kplane service its own NATS identity: it
// keeps one NKey user per service (the seed in a file of its own, mode
// 0600) and renders the nats-server configuration that admits those users
// with the permissions kplane.dev/proto/access assigns them.
//
// The configuration is a file, so that the embedded server of the local
// launcher, a NATS container and a Helm-deployed NATS load the same thing
// (nats-server -c, or include it from a larger configuration). Seeds are
// kept across runs; deleting a seed file and generating again rotates that
// service's key, and the configuration is rewritten from the seeds each
// time.
package natsauth
