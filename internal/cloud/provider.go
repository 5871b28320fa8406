package cloud

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	pcp "github.com/stratus-ccm/stratus/pkg/cloudprovider"
)

// Provider is one configured provider as the controllers see it. It implements
// cloudprovider.Interface; every call goes through the layer.
type Provider struct {
	name string
	raw  cloudprovider.Interface
}

var _ cloudprovider.Interface = (*Provider)(nil)

// NewProvider wraps raw, the provider a registered factory returned, under the
// configured name.
func NewProvider(name string, raw cloudprovider.Interface) *Provider {
	return &Provider{name: name, raw: raw}
}

// Name is the provider's name in the manager configuration (for logs and metrics).
func (p *Provider) Name() string { return p.name }

// Raw returns the unwrapped provider. Only the manager uses it, to hand the provider
// its client builder and informers.
func (p *Provider) Raw() cloudprovider.Interface { return p.raw }

// Initialize passes through to the provider.
func (p *Provider) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	p.raw.Initialize(b, stop)
}

// LoadBalancer returns the provider's load balancers, through the layer.
func (p *Provider) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return p.raw.LoadBalancer() }

// Instances returns the provider's Instances (v1), through the layer.
func (p *Provider) Instances() (cloudprovider.Instances, bool) { return p.raw.Instances() }

// InstancesV2 returns the provider's InstancesV2, through the layer.
func (p *Provider) InstancesV2() (cloudprovider.InstancesV2, bool) { return p.instancesV2() }

// Zones returns the provider's Zones, through the layer.
func (p *Provider) Zones() (cloudprovider.Zones, bool) { return p.raw.Zones() }

// Clusters returns the provider's Clusters, through the layer.
func (p *Provider) Clusters() (cloudprovider.Clusters, bool) { return p.raw.Clusters() }

// Routes returns the provider's Routes, through the layer.
func (p *Provider) Routes() (cloudprovider.Routes, bool) { return p.raw.Routes() }

// ProviderName returns the provider's own name, the scheme of its provider IDs.
func (p *Provider) ProviderName() string { return p.raw.ProviderName() }

// HasClusterID passes through to the provider.
func (p *Provider) HasClusterID() bool { return p.raw.HasClusterID() }

// instancesV2 follows upstream: InstancesV2 counts only when it is supported and
// not nil.
func (p *Provider) instancesV2() (cloudprovider.InstancesV2, bool) {
	v2, ok := p.raw.InstancesV2()
	return v2, ok && v2 != nil
}

// HasInstances reports whether the provider supports InstancesV2 or Instances, the
// condition for running the node controllers on it.
func (p *Provider) HasInstances() bool {
	if _, ok := p.instancesV2(); ok {
		return true
	}
	_, ok := p.raw.Instances()
	return ok
}

// InstanceMetadata returns the metadata of the node's instance: through
// InstancesV2 when the provider has it, otherwise assembled from Instances (v1) and
// Zones with upstream's fallbacks from provider-ID to node-name lookups. It returns
// (nil, nil) when an InstancesV2 provider returns no metadata.
func (p *Provider) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if v2, ok := p.instancesV2(); ok {
		return v2.InstanceMetadata(ctx, node)
	}
	return p.metadataV1(ctx, node)
}

func (p *Provider) metadataV1(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, ok := p.raw.Instances()
	if !ok {
		return nil, fmt.Errorf("provider %s supports neither Instances nor InstancesV2", p.name)
	}
	name := types.NodeName(node.Name)
	providerID := node.Spec.ProviderID
	if providerID == "" {
		id, err := cloudprovider.GetInstanceProviderID(ctx, p.raw, name)
		switch {
		case err == nil:
			providerID = id
		case errors.Is(err, cloudprovider.NotImplemented):
			// Tolerated: name-based lookups follow.
		default:
			return nil, fmt.Errorf("get provider ID of node %s: %w", node.Name, err)
		}
	}
	md := &cloudprovider.InstanceMetadata{ProviderID: providerID}

	var err error
	if providerID != "" {
		md.NodeAddresses, err = inst.NodeAddressesByProviderID(ctx, providerID)
	}
	if providerID == "" || err != nil {
		if md.NodeAddresses, err = inst.NodeAddresses(ctx, name); err != nil {
			return nil, fmt.Errorf("get addresses of node %s: %w", node.Name, err)
		}
	}
	err = nil
	if providerID != "" {
		md.InstanceType, err = inst.InstanceTypeByProviderID(ctx, providerID)
	}
	if providerID == "" || err != nil {
		if md.InstanceType, err = inst.InstanceType(ctx, name); err != nil {
			return nil, fmt.Errorf("get instance type of node %s: %w", node.Name, err)
		}
	}
	if zones, ok := p.raw.Zones(); ok {
		var zone cloudprovider.Zone
		err = nil
		if providerID != "" {
			zone, err = zones.GetZoneByProviderID(ctx, providerID)
		}
		if providerID == "" || err != nil {
			if zone, err = zones.GetZoneByNodeName(ctx, name); err != nil {
				return nil, fmt.Errorf("get zone of node %s: %w", node.Name, err)
			}
		}
		md.Zone, md.Region = zone.FailureDomain, zone.Region
	}
	return md, nil
}

// InstanceExists reports whether the node's instance exists (a stopped instance
// exists). With Instances (v1), a node without provider ID is looked up by name and
// InstanceNotFound counts as "does not exist".
func (p *Provider) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	if v2, ok := p.instancesV2(); ok {
		return v2.InstanceExists(ctx, node)
	}
	inst, ok := p.raw.Instances()
	if !ok {
		return false, fmt.Errorf("provider %s supports neither Instances nor InstancesV2", p.name)
	}
	providerID, err := p.providerIDV1(ctx, node)
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return inst.InstanceExistsByProviderID(ctx, providerID)
}

// InstanceShutdown reports whether the node's instance is shut down. With Instances
// (v1), NotImplemented and a provider-ID lookup that finds no instance mean "not
// shut down".
func (p *Provider) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	if v2, ok := p.instancesV2(); ok {
		return v2.InstanceShutdown(ctx, node)
	}
	inst, ok := p.raw.Instances()
	if !ok {
		return false, fmt.Errorf("provider %s supports neither Instances nor InstancesV2", p.name)
	}
	providerID, err := p.providerIDV1(ctx, node)
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	down, err := inst.InstanceShutdownByProviderID(ctx, providerID)
	if errors.Is(err, cloudprovider.NotImplemented) {
		return false, nil
	}
	return down, err
}

func (p *Provider) providerIDV1(ctx context.Context, node *v1.Node) (string, error) {
	if node.Spec.ProviderID != "" {
		return node.Spec.ProviderID, nil
	}
	return cloudprovider.GetInstanceProviderID(ctx, p.raw, types.NodeName(node.Name))
}

// ListInstances lists all instances in one (paged) call when the provider, or its
// InstancesV2, implements pcp.InstanceLister; ok is false when it does not.
func (p *Provider) ListInstances(ctx context.Context) (instances []pcp.Instance, ok bool, err error) {
	lister, ok := p.instanceLister()
	if !ok {
		return nil, false, nil
	}
	instances, err = lister.ListInstances(ctx)
	return instances, true, err
}

func (p *Provider) instanceLister() (pcp.InstanceLister, bool) {
	if l, ok := p.raw.(pcp.InstanceLister); ok {
		return l, true
	}
	if v2, ok := p.instancesV2(); ok {
		if l, ok := v2.(pcp.InstanceLister); ok {
			return l, true
		}
	}
	return nil, false
}

// ListLoadBalancers lists the load balancers the provider created for clusterName
// when the provider, or its LoadBalancer, implements pcp.LoadBalancerLister; ok is
// false when it does not.
func (p *Provider) ListLoadBalancers(ctx context.Context, clusterName string) (lbs []pcp.LoadBalancerRef, ok bool, err error) {
	var lister pcp.LoadBalancerLister
	if l, isLister := p.raw.(pcp.LoadBalancerLister); isLister {
		lister = l
	} else if lb, supported := p.raw.LoadBalancer(); supported {
		lister, _ = lb.(pcp.LoadBalancerLister)
	}
	if lister == nil {
		return nil, false, nil
	}
	lbs, err = lister.ListLoadBalancers(ctx, clusterName)
	return lbs, true, err
}
