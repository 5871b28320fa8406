// Package node is the cloud node controller: it initializes Nodes that kubelet
// registered with the node.cloudprovider.kubernetes.io/uninitialized taint (provider
// ID, addresses, instance-type and topology labels, provider labels, then the taint
// removed), keeps the addresses of initialized Nodes current with a periodic refresh,
// and keeps the deprecated beta topology labels in step with the GA ones.
//
// It follows the upstream cloud-node-controller contract (docs/design/upstream-behaviors.md) with the
// deliberate differences listed in docs/nodes.md: GA labels are the source of truth,
// address changes are detected by exact ordered comparison, the refresh asks each
// provider that can list its instances for one listing per pass instead of one call
// per node, worker counts below 1 are rejected, and a Node that no configured
// provider owns (cloud.Set.ForNode returns nil) is never read from a cloud nor
// written.
package node
