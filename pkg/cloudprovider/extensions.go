package cloudprovider

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
}

// LoadBalancerLister lists the load balancers the provider created for a cluster
// (those carrying the cluster's tag or equivalent). Load balancers created by
// anybody else must not be returned: stratus deletes returned load balancers whose
// Service no longer exists, by calling EnsureLoadBalancerDeleted with a Service
// rebuilt from the reference.
type LoadBalancerLister interface {
	ListLoadBalancers(ctx context.Context, clusterName string) ([]LoadBalancerRef, error)
}
