// Package route is the route controller: it programs one cloud route per node pod
// CIDR through the routes provider, removes routes that no node needs any more, and
// reports the outcome in each node's NetworkUnavailable condition.
//
// It behaves like the upstream cloud-controller-manager's route controller in its
// watch-based mode (KEP-5237): node additions, deletions and changes of
// spec.podCIDRs or status.addresses enqueue one cluster-wide reconcile, a token
// bucket lets at most one reconcile start per --route-reconciliation-period, a
// periodic full reconcile catches drift in the cloud, and failed reconciles are
// retried with exponential backoff. Only routes whose destination lies inside
// --cluster-cidr are ever deleted; routes to nodes that another provider owns are
// left alone. Add registers the controller with a controller-runtime manager.
package route
