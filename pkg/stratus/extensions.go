package stratus

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// Instance is one machine as a listing reports it.
type Instance struct {
	// Name is the instance's name in the cloud. For a node without
	// spec.providerID, the instance whose Name equals the node name is its machine.
	Name string
	// Metadata is what InstancesV2.InstanceMetadata would return for the instance.
	// Metadata.ProviderID must be set.
	Metadata cloudprovider.InstanceMetadata
	// Shutdown is true when the instance exists but is stopped, as
	// InstancesV2.InstanceShutdown would report it.
	Shutdown bool
	// Hostnames are other names a node of this instance may be registered
	// under (the guest OS hostname, for example). A node without
	// spec.providerID whose name matches no instance's Name is the machine of
	// the instance that lists the node name here. Optional.
	Hostnames []string
	// SystemUUIDs identify the machine by firmware UUID, as kubelet reports it
	// in status.nodeInfo.systemUUID. A node without spec.providerID that
	// matches no name is the machine of the instance that lists its system
	// UUID here (compared case-insensitively). A provider whose firmware UUID
	// can be read in either byte order lists both. Optional.
	SystemUUIDs []string
	// MetadataErr, when set, says why the instance's metadata is not
	// complete yet (a VM whose guest reports no IP addresses, for example).
	// The instance exists and Shutdown is accurate, but InstanceMetadata for
	// its node should fail with this error, as InstancesV2.InstanceMetadata
	// would, instead of answering with Metadata: a node is then not
	// initialized with missing addresses or labels. Metadata.ProviderID is
	// still set. Optional.
	MetadataErr error
}

// InstanceLister lists every instance the provider can see, in one call (the
// implementation pages through the cloud API as needed). An instance missing from
// a successful listing does not exist.
//
// It must return an error, never a partial list, when any page fails: stratus
// treats the listing as the truth about which machines exist.
type InstanceLister interface {
	ListInstances(ctx context.Context) ([]Instance, error)
}

// InstanceWatcher is an InstanceLister that learns about instance changes from
// the cloud (a change feed or watch) rather than by listing again. Its
// ListInstances answers from what the watch keeps current, so stratus may call it
// often at no cost to the cloud API.
//
// stratus calls WatchInstances once, on the leader, and again with a backoff when
// it returns an error before ctx ends. The provider calls changed (it does not
// block, and may be called from any goroutine) whenever a ListInstances call
// made now could answer differently from one made before: an instance appeared,
// disappeared, was powered off or on, or changed metadata. stratus then lists
// again and acts at once (a machine that was deleted or stopped reaches the node
// lifecycle controller within seconds), instead of at its next periodic pass.
//
// While the watch is broken, ListInstances must return an error (never a stale
// or partial list), until the provider has listed afresh.
type InstanceWatcher interface {
	InstanceLister
	WatchInstances(ctx context.Context, changed func()) error
}

// LoadBalancerRef identifies a load balancer the provider created for a Service.
type LoadBalancerRef struct {
	// Name is the load balancer's name, as GetLoadBalancerName returned it.
	Name string
	// ServiceNamespace, ServiceName and ServiceUID identify the Service the load
	// balancer was created for, as recorded in the cloud (tags, description, ...).
	ServiceNamespace string
	ServiceName      string
	ServiceUID       types.UID
	// Status is the load balancer's status as GetLoadBalancer would report it, or
	// nil when the listing does not carry it. With it, stratus's periodic drift
	// check needs no GetLoadBalancer call per load balancer.
	//
	// When EnsureLoadBalancer returned a RetryError (still provisioning),
	// stratus watches shared listings instead of calling EnsureLoadBalancer
	// again for every waiting Service: while the Service and its nodes are
	// unchanged, a listed Status (with Provisioning false) is taken as that
	// Ensure's result. A provider whose Ensure has work left once the load
	// balancer is up must keep Provisioning true (or Status nil) until then.
	Status *v1.LoadBalancerStatus
	// Provisioning says the load balancer exists but is not ready yet (Status
	// is nil): stratus then waits for a later listing rather than calling
	// EnsureLoadBalancer again. Leave it false when the listing cannot tell.
	Provisioning bool
	// Backends is a digest of the backends the load balancer targets, as
	// the provider's BackendsDigester computes it, or "" when the listing
	// does not carry one. With it, a newly elected stratus checks the load
	// balancers it adopts (ensured by an earlier leader, their backends
	// unknown to it) against one listing, and sends UpdateLoadBalancer only
	// to those whose backends differ, instead of one call per load balancer.
	Backends string
}

// BackendsDigester is a LoadBalancer (or the provider) whose listings carry
// each load balancer's backends digest (LoadBalancerRef.Backends).
//
// BackendsDigest returns the digest a listing would carry for svc's load
// balancer if UpdateLoadBalancer(ctx, clusterName, svc, nodes) had just
// succeeded, and true; or false when it cannot tell without a cloud call
// (a node whose instance it would have to look up). It makes no cloud call.
// Two digests are equal only when the targets are: stratus skips the update
// of a load balancer whose listed digest equals it, so a digest that
// matched wrongly would leave a load balancer with stale backends. When in
// doubt, return false or a digest that cannot match.
type BackendsDigester interface {
	BackendsDigest(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (string, bool)
}

// LoadBalancerLister lists the load balancers the provider created for a cluster
// (those carrying the cluster's tag or equivalent). Load balancers created by
// anybody else must not be returned: stratus deletes returned load balancers whose
// Service no longer exists, by calling EnsureLoadBalancerDeleted with a Service
// rebuilt from the reference.
type LoadBalancerLister interface {
	ListLoadBalancers(ctx context.Context, clusterName string) ([]LoadBalancerRef, error)
}

// absentKey is the context key of WithLoadBalancerAbsent.
type absentKey struct{}

// WithLoadBalancerAbsent marks ctx, the context of an EnsureLoadBalancer call,
// as one for a Service that has had no load balancer as far as Kubernetes
// shows: it lacked the finalizer service.kubernetes.io/load-balancer-cleanup,
// which every manager adds before the first EnsureLoadBalancer of a Service
// and removes only after its load balancer is deleted; or it had the
// finalizer but a recent listing of the provider's load balancers lacked
// its load balancer. In a burst of new Services that is nearly every call.
//
// A provider may then create the load balancer without looking it up first,
// and trust the answer of that create without reading it back. It must still
// be correct when the mark is wrong (another manager may have created the load
// balancer meanwhile, or somebody removed the finalizer by hand): use it only
// when the create cannot make a duplicate (unique names), and take the usual
// path (look up, then update) when the create reports that the load balancer
// exists. Do not replay an earlier create's answer (an idempotency key whose
// record outlives the load balancer): the answer could describe a load
// balancer deleted since.
func WithLoadBalancerAbsent(ctx context.Context) context.Context {
	return context.WithValue(ctx, absentKey{}, true)
}

// LoadBalancerAbsent reports whether ctx carries WithLoadBalancerAbsent's
// mark.
func LoadBalancerAbsent(ctx context.Context) bool {
	v, _ := ctx.Value(absentKey{}).(bool)
	return v
}

// RequestLimiter is a provider (the value its registered factory returns)
// that limits its own requests to the cloud API, as its cloud-config says.
// stratus then makes that limit the default of the provider's request budget
// (configuration key budget.rate and budget.burst), instead of a fixed one.
type RequestLimiter interface {
	// RequestLimit returns the requests per second the provider allows
	// itself and their burst; 0 means no limit.
	RequestLimit() (perSecond float64, burst int)
}

// requestCounterKey is the context key of WithRequestCounter.
type requestCounterKey struct{}

// WithRequestCounter returns ctx with count as its request counter: stratus's
// cloud layer sets it on the context of every provider call, so that the
// request budget counts the cloud's requests rather than method calls.
func WithRequestCounter(ctx context.Context, count func()) context.Context {
	return context.WithValue(ctx, requestCounterKey{}, count)
}

// CountRequest records that the call whose context is ctx sends one request
// to the cloud API. A provider whose methods may send several requests (a
// lookup, then a create) calls it once per request, typically from its HTTP
// transport; stratus's request budget then charges every request, not one
// per method call. It does nothing outside a stratus call.
func CountRequest(ctx context.Context) {
	if count, ok := ctx.Value(requestCounterKey{}).(func()); ok {
		count()
	}
}

// BackendPooler is a provider (the value its registered factory returns)
// whose load balancers can share backend pools: named sets of instances
// that many load balancers target, as GCE's instance groups and Azure's
// backend address pools. BackendPools returns them and true when the
// provider uses them (its configuration may leave them off); a provider
// that returns false, or does not implement BackendPooler, gets one
// UpdateLoadBalancer per load balancer when nodes change, as upstream does.
type BackendPooler interface {
	BackendPools() (BackendPools, bool)
}

// BackendPools are a provider's shared backend pools. When nodes join or
// leave, stratus sends each pool whose members changed one
// UpdateBackendPool, and the load balancers that target the pools follow
// without an UpdateLoadBalancer each: a node joining a cluster of hundreds
// of load balancers is one call per pool rather than one per load balancer.
//
// Who owns a pool's members: stratus does. EnsureLoadBalancer and
// UpdateLoadBalancer called with a context carrying BackendPoolsManaged
// make their load balancer target the pools that PoolsOf gives for their
// nodes, and create a pool that is missing (with those nodes), but must
// not change the members of an existing pool: stratus may have sent it
// newer ones meanwhile. Without the mark (an upstream manager calling the
// provider), they set the pools' members too, as they would their own
// targets.
//
// A load balancer whose pools' keys change (the first node of a new zone,
// say) gets an UpdateLoadBalancer with its nodes after the new pool was
// sent. Any error of UpdateBackendPool (a 5xx, a timeout) means the pool
// may or may not have its new members: stratus sends it again, and the
// load balancers that target it are not counted as updated until it
// succeeds.
type BackendPools interface {
	// PoolsOf partitions backend nodes into pools: the key of each pool
	// (a zone, or one key for the cluster) and its members, in the order
	// given. It makes no cloud call and must give the same answer for the
	// same nodes. A node in no pool is served by no pooled load balancer.
	PoolsOf(nodes []*v1.Node) map[string][]*v1.Node
	// UsesBackendPools reports whether svc's load balancer targets the
	// pools; one that does not (a Service the cloud cannot health-check
	// per load balancer, for example) keeps its own targets and gets
	// UpdateLoadBalancer as before.
	UsesBackendPools(svc *v1.Service) bool
	// UpdateBackendPool makes pool key of clusterName have exactly nodes as
	// members, creating it when it is missing.
	UpdateBackendPool(ctx context.Context, clusterName, key string, nodes []*v1.Node) error
}

// poolsManagedKey is the context key of WithBackendPoolsManaged.
type poolsManagedKey struct{}

// WithBackendPoolsManaged marks ctx, the context of an EnsureLoadBalancer
// or UpdateLoadBalancer call, as one whose backend pools' members stratus
// keeps (BackendPools): the call must not change an existing pool's members.
func WithBackendPoolsManaged(ctx context.Context) context.Context {
	return context.WithValue(ctx, poolsManagedKey{}, true)
}

// BackendPoolsManaged reports whether ctx carries WithBackendPoolsManaged's
// mark.
func BackendPoolsManaged(ctx context.Context) bool {
	v, _ := ctx.Value(poolsManagedKey{}).(bool)
	return v
}
