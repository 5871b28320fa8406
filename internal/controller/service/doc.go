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
//     UpdateLoadBalancer per window;
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
// Each sync, backend pass and periodic scan observes, plans with a pure function
// of what it observed, the state kept per Service and the time of the injected
// Options.Clock (plan.go), and applies the plan in one place.
//
// Add registers all of it with a controller-runtime manager. docs/loadbalancers.md
// is the user-facing description; docs/design/service-plan.md explains the shape.
package service
