// Package kube is hnsplan-agent's side of the Kubernetes API: a cache of the
// cluster data the reconciler needs (pods, namespaces, nodes, Calico
// BlockAffinities), this node's status (annotations and Events), its VXLAN
// tunnel data for Calico's Linux nodes, and the cordon/evict/uncordon steps of
// a network replacement.
//
// Everything is level-based, as sample-controller's controllers are: the
// cache signals that something relevant changed, never what, and the
// reconciler rereads the snapshot accessors. The snapshots are the package's
// own small types with netip addresses, so the reconciler never touches
// client-go objects and never modifies the informers' stores.
//
// Memory matters: a cluster-wide pod cache holds every pod of the cluster (the
// policy renderer needs remote pods' labels and IPs). Informer transforms keep
// only the fields listed on [Pod], [Node] and [Namespace]; see
// memory_integration_test.go for the measured figures.
package kube
