// Package chain is the admission chain one replica runs for each phase
// of a write: it decodes the review once, runs the phase's steps in
// kube's order (policies before webhooks), and turns what they decided
// into the Verdict of kplane.dev/proto/admission.
//
// Until the replica has read its configuration it decides nothing, so
// that no write passes unchecked by a step it has not seen yet; it
// answers Unsynced and the requester asks again. The storage services'
// own writes at start are admitted all the same: they come before the
// gateway, and with it the configuration, can be read at all.
package chain
