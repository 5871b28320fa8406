// Package service is stratus's service (load balancer) controller: it provisions,
// updates and deletes cloud load balancers for `type: LoadBalancer` Services with
// the upstream service controller's contract (finalizer
// service.kubernetes.io/load-balancer-cleanup, status.loadBalancer.ingress, event
// reasons, backend node predicates) and fixes its known limits:
//
//   - classes: a Service is served by the provider mapped to its
//     spec.loadBalancerClass (cloud.Set.ForService); unmapped classes are left alone;
//   - non-blocking provisioning: a provider's RetryError requeues the Service after
//     exactly its delay, other errors back off per Service from 5s to 300s, and many
//     workers run in parallel;
//   - coalesced backend updates: node changes that alter the backend set are gathered
//     over a short window and each load balancer gets at most one
//     UpdateLoadBalancer per window; with a provider whose load balancers
//     share backend pools (stratus.BackendPooler), each changed pool gets one
//     UpdateBackendPool instead and its load balancers follow (pools.go);
//   - a LoadBalancerReady condition on the Service besides events, and validation of
//     stratus's annotations (pkg/annotations) before the cloud is called;
//   - drift repair: every resync period each load balancer is checked with
//     GetLoadBalancer and re-ensured when missing or different;
//   - orphan removal: load balancers the provider lists as this cluster's whose
//     Service no longer exists are deleted after a grace period;
//   - no re-ensure of every load balancer at start-up: one whose Ready condition
//     records exactly the current configuration (a fingerprint) is adopted, and
//     one backend pass sends it the current backends (the fingerprint has none,
//     so that a backend update writes nothing to the Service).
//
// Each sync, backend pass and periodic scan observes, plans with pure functions
// of what it observed, the state kept between them and the time of the
// injected Options.Clock (plan.go), and applies the plan. A Service's sync
// (reconcile.go) observes what its plan reads without writing anything
// (observe), computes one plan (planService) and carries it out in one place
// (Controller.apply): deleting the old load balancer, the finalizer on and
// off, an adoption, the EnsureLoadBalancer call, events, the condition, the
// status and the state kept are all actions of it. EnsureLoadBalancer's
// answer continues the plan as planEnsureResult plans it, and a failed write
// ends it as planFailure plans. The backend pass (backendpass.go) runs on the
// node changes of nodeevents.go over the backends that backends.go selects
// from the node index (nodeindex.go); the periodic scan is periodic.go.
// fingerprint.go holds what a load balancer is made of (lbConfig), the
// Service changes that re-ensure it and the fingerprint adoption reads.
//
// Add registers all of it with a controller-runtime manager. docs/loadbalancers.md
// is the user-facing description; docs/design/service-plan.md explains the shape.
package service
