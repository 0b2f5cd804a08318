// Package election runs work on one replica at a time: replicas campaign in
// an etcd election on a lease, and only the leader runs its work, with a
// context that ends the moment leadership is lost and an etcd comparison
// that fences its writes, so a replica that lost the lead without noticing
// cannot write as leader.
package election
