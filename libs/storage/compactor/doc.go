// Package compactor compacts etcd's history periodically, as kube-apiserver
// does: every interval it compacts to the revision it saw one interval
// earlier, so a watch always has at least an interval of history to resume
// from. Of all the replicas running a Compactor, only the one that wins an
// etcd election compacts.
package compactor
