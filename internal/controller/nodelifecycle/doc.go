// Package nodelifecycle is the cloud node lifecycle controller: every
// --node-monitor-period it checks the NotReady Nodes each provider owns against the
// cloud, taints those whose instance is shut down with
// node.cloudprovider.kubernetes.io/shutdown:NoSchedule (removed again when the Node
// is Ready), and deletes those whose instance is gone.
//
// Deleting a Node is the most destructive thing a cloud controller manager does,
// and upstream does it on a single "does not exist" answer (docs/design/deletion-guard.md).
// Here a Node is deleted only when all of these hold: its provider owns it
// (cloud.Set.ForNode), it has been NotReady for longer than DeletionGracePeriod,
// the provider said "does not exist" on two checks in a row, and the provider's
// deletion budget allows it. A failed instance listing, or an empty one while the
// provider owns nodes, deletes nothing. Every deletion the guard holds back is
// reported with a NodeDeletionBlocked event and the
// stratus_node_deletion_blocked_total metric. Ready Nodes are never deleted.
//
// When the provider can list its instances (pkg/stratus.InstanceLister), a
// pass costs one listing per provider; otherwise one or two calls per NotReady
// Node. Ready Nodes cost nothing.
//
// Each pass observes (Nodes, then the cloud's answers for the NotReady ones),
// plans (state.plan: a pure function of the observations, the time from the
// injected Options.Clock and the per-node state kept between passes) and applies
// the plan; plan_test.go drives the guard's timing pass by pass on made-up times.
package nodelifecycle
