// Package stratus is what provider authors import from stratus.
//
// The base contract stays k8s.io/cloud-provider's Interface: a provider registered
// with cloudprovider.RegisterCloudProvider in an init() block runs in stratus
// unchanged. This package adds optional extension interfaces. When the provider
// object (the value the registered factory returns) or its InstancesV2 / LoadBalancer
// implementation also implements one of them, stratus's cloud layer uses it to
// replace many per-object calls with one listing:
//
//   - InstanceLister: every instance with its metadata and power state, in one
//     (paged) listing, so that node initialization, address refresh and lifecycle
//     checks at thousands of nodes cost a few calls instead of one per node.
//   - LoadBalancerLister: the load balancers the provider created for a cluster, so
//     that load balancers whose Service is gone (orphans) can be found and removed.
//   - LoadBalancerCapable and LoadBalancerValidator: what the provider's load
//     balancers can do, and a dry run of EnsureLoadBalancer, so that stratus's
//     admission webhook refuses a Service the cloud would refuse before it is
//     stored.
//
// It also defines errors a provider returns so that stratus waits instead of
// failing: ThrottledError (the cloud API rate-limited us, e.g. HTTP 429 with
// Retry-After: every call to the provider pauses, then the call is retried) and
// TransientError (retry with backoff). Any other error reaches the controller as is.
package stratus
