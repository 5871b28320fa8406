package cloud

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// The wrappers below put every method of a provider's capability through call:
// the request budget, retries and metrics. Method names are the metric labels.

// loadBalancer wraps a provider's LoadBalancer.
type loadBalancer struct {
	p   *Provider
	raw cloudprovider.LoadBalancer
}

// GetLoadBalancer implements cloudprovider.LoadBalancer.
func (l *loadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	type result struct {
		status *v1.LoadBalancerStatus
		exists bool
	}
	r, err := call(ctx, l.p, "GetLoadBalancer", func(ctx context.Context) (result, error) {
		status, exists, err := l.raw.GetLoadBalancer(ctx, clusterName, svc)
		return result{status, exists}, err
	})
	return r.status, r.exists, err
}

// GetLoadBalancerName implements cloudprovider.LoadBalancer. Names are computed
// locally by providers, so this costs no budget.
func (l *loadBalancer) GetLoadBalancerName(ctx context.Context, clusterName string, svc *v1.Service) string {
	return l.raw.GetLoadBalancerName(ctx, clusterName, svc)
}

// EnsureLoadBalancer implements cloudprovider.LoadBalancer. A RetryError (load
// balancer still provisioning) is returned unchanged, without waiting.
func (l *loadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	return call(ctx, l.p, "EnsureLoadBalancer", func(ctx context.Context) (*v1.LoadBalancerStatus, error) {
		return l.raw.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	})
}

// UpdateLoadBalancer implements cloudprovider.LoadBalancer.
func (l *loadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	return callErr(ctx, l.p, "UpdateLoadBalancer", func(ctx context.Context) error {
		return l.raw.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
	})
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer.
func (l *loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	return callErr(ctx, l.p, "EnsureLoadBalancerDeleted", func(ctx context.Context) error {
		return l.raw.EnsureLoadBalancerDeleted(ctx, clusterName, svc)
	})
}

// instances wraps a provider's Instances (v1).
type instances struct {
	p   *Provider
	raw cloudprovider.Instances
}

// NodeAddresses implements cloudprovider.Instances.
func (i *instances) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	return call(ctx, i.p, "NodeAddresses", func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.raw.NodeAddresses(ctx, name)
	})
}

// NodeAddressesByProviderID implements cloudprovider.Instances.
func (i *instances) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]v1.NodeAddress, error) {
	return call(ctx, i.p, "NodeAddressesByProviderID", func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.raw.NodeAddressesByProviderID(ctx, providerID)
	})
}

// InstanceID implements cloudprovider.Instances. InstanceNotFound and
// NotImplemented come back unchanged (by identity), as callers compare them so.
func (i *instances) InstanceID(ctx context.Context, name types.NodeName) (string, error) {
	return call(ctx, i.p, "InstanceID", func(ctx context.Context) (string, error) {
		return i.raw.InstanceID(ctx, name)
	})
}

// InstanceType implements cloudprovider.Instances.
func (i *instances) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	return call(ctx, i.p, "InstanceType", func(ctx context.Context) (string, error) {
		return i.raw.InstanceType(ctx, name)
	})
}

// InstanceTypeByProviderID implements cloudprovider.Instances.
func (i *instances) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	return call(ctx, i.p, "InstanceTypeByProviderID", func(ctx context.Context) (string, error) {
		return i.raw.InstanceTypeByProviderID(ctx, providerID)
	})
}

// AddSSHKeyToAllInstances implements cloudprovider.Instances.
func (i *instances) AddSSHKeyToAllInstances(ctx context.Context, user string, keyData []byte) error {
	return callErr(ctx, i.p, "AddSSHKeyToAllInstances", func(ctx context.Context) error {
		return i.raw.AddSSHKeyToAllInstances(ctx, user, keyData)
	})
}

// CurrentNodeName implements cloudprovider.Instances.
func (i *instances) CurrentNodeName(ctx context.Context, hostname string) (types.NodeName, error) {
	return call(ctx, i.p, "CurrentNodeName", func(ctx context.Context) (types.NodeName, error) {
		return i.raw.CurrentNodeName(ctx, hostname)
	})
}

// InstanceExistsByProviderID implements cloudprovider.Instances.
func (i *instances) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	return call(ctx, i.p, "InstanceExistsByProviderID", func(ctx context.Context) (bool, error) {
		return i.raw.InstanceExistsByProviderID(ctx, providerID)
	})
}

// InstanceShutdownByProviderID implements cloudprovider.Instances.
func (i *instances) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	return call(ctx, i.p, "InstanceShutdownByProviderID", func(ctx context.Context) (bool, error) {
		return i.raw.InstanceShutdownByProviderID(ctx, providerID)
	})
}

// instancesV2 is the layer's InstancesV2: Provider's cache-aware methods.
type instancesV2 struct{ p *Provider }

// InstanceExists implements cloudprovider.InstancesV2.
func (i instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	return i.p.InstanceExists(ctx, node)
}

// InstanceShutdown implements cloudprovider.InstancesV2.
func (i instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	return i.p.InstanceShutdown(ctx, node)
}

// InstanceMetadata implements cloudprovider.InstancesV2.
func (i instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return i.p.InstanceMetadata(ctx, node)
}

// zones wraps a provider's Zones.
type zones struct {
	p   *Provider
	raw cloudprovider.Zones
}

// GetZone implements cloudprovider.Zones.
func (z *zones) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	return call(ctx, z.p, "GetZone", z.raw.GetZone)
}

// GetZoneByProviderID implements cloudprovider.Zones.
func (z *zones) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	return call(ctx, z.p, "GetZoneByProviderID", func(ctx context.Context) (cloudprovider.Zone, error) {
		return z.raw.GetZoneByProviderID(ctx, providerID)
	})
}

// GetZoneByNodeName implements cloudprovider.Zones.
func (z *zones) GetZoneByNodeName(ctx context.Context, name types.NodeName) (cloudprovider.Zone, error) {
	return call(ctx, z.p, "GetZoneByNodeName", func(ctx context.Context) (cloudprovider.Zone, error) {
		return z.raw.GetZoneByNodeName(ctx, name)
	})
}

// clusters wraps a provider's Clusters.
type clusters struct {
	p   *Provider
	raw cloudprovider.Clusters
}

// ListClusters implements cloudprovider.Clusters.
func (c *clusters) ListClusters(ctx context.Context) ([]string, error) {
	return call(ctx, c.p, "ListClusters", c.raw.ListClusters)
}

// Master implements cloudprovider.Clusters.
func (c *clusters) Master(ctx context.Context, clusterName string) (string, error) {
	return call(ctx, c.p, "Master", func(ctx context.Context) (string, error) {
		return c.raw.Master(ctx, clusterName)
	})
}

// routes wraps a provider's Routes.
type routes struct {
	p   *Provider
	raw cloudprovider.Routes
}

// ListRoutes implements cloudprovider.Routes.
func (r *routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	return call(ctx, r.p, "ListRoutes", func(ctx context.Context) ([]*cloudprovider.Route, error) {
		return r.raw.ListRoutes(ctx, clusterName)
	})
}

// CreateRoute implements cloudprovider.Routes.
func (r *routes) CreateRoute(ctx context.Context, clusterName, nameHint string, route *cloudprovider.Route) error {
	return callErr(ctx, r.p, "CreateRoute", func(ctx context.Context) error {
		return r.raw.CreateRoute(ctx, clusterName, nameHint, route)
	})
}

// DeleteRoute implements cloudprovider.Routes.
func (r *routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	return callErr(ctx, r.p, "DeleteRoute", func(ctx context.Context) error {
		return r.raw.DeleteRoute(ctx, clusterName, route)
	})
}
