// Package watchshare lets watches that ask a backend for the same stream
// share one upstream watch, so that a change watched by many clients
// crosses the gateway-to-backend hop once instead of once per client.
//
// Without it every watcher is a stream of its own from core to the
// gateway: core encodes, frames, encrypts and writes each event once per
// watcher, and the gateway reads, decrypts and copies it once per watcher
// before writing it to the client. With 200 watchers of one object that
// was two thirds of the CPU of delivering an update (issue 14), where
// kube-apiserver pays only the last write.
//
// Two watches share a stream when they name the same backend, path,
// selectors and Accept header, and their starting points allow it:
//
//   - resourceVersion=0 starts with the current state, as ADDED events,
//     then follows the changes. A stream opened that way keeps the state
//     its events built (objects by namespace and name), and a watcher
//     joining later gets that state as ADDED events followed by the
//     stream's next events: what a watch of its own would have sent,
//     taken at the stream's position.
//   - resourceVersion=N starts after revision N. A stream opened that way
//     keeps its last events, and a watcher from N' joins when the stream
//     has delivered every change up to N' and keeps those after it: it
//     gets the kept events after N', then the stream's next ones.
//
// Anything else (resourceVersion unset, sendInitialEvents, tables,
// protobuf, parameters the gateway does not know) is a watch of its own,
// proxied as before, as is a watcher that no live stream can take: it
// opens a new stream, which later watchers may share.
//
// A stream's upstream asks for bookmarks, so that its position keeps up
// with the store when its objects do not change; a watcher gets them
// only when it asked for them. A watcher's own timeoutSeconds ends its
// response, not the stream; a watcher that falls behind by more than its
// buffer is ended, as kube-apiserver ends a watcher that cannot keep up,
// and its client watches again from the last event it decoded. The
// upstream ends when its last watcher leaves, and when it ends every
// watcher's response ends with it, cleanly, as a backend ending a watch
// would.
package watchshare
