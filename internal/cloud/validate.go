package cloud

import (
	"context"
	"errors"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// LoadBalancerCapabilities returns what the provider, or its LoadBalancer,
// declares its load balancers can do (stratus.LoadBalancerCapable); ok is
// false when it declares nothing.
func (p *Provider) LoadBalancerCapabilities() (caps stratus.LoadBalancerCapabilities, ok bool) {
	c, isCapable := p.raw.(stratus.LoadBalancerCapable)
	if !isCapable {
		if lb, supported := p.raw.LoadBalancer(); supported {
			c, isCapable = lb.(stratus.LoadBalancerCapable)
		}
	}
	if !isCapable {
		return caps, false
	}
	if declared := c.LoadBalancerCapabilities(); declared != nil {
		return *declared, true
	}
	return caps, false
}

// ValidateLoadBalancer asks the provider, or its LoadBalancer, whether it
// would accept svc's load balancer (stratus.LoadBalancerValidator); ok is
// false when it cannot be asked. The call goes through the request budget
// at the context's priority.
func (p *Provider) ValidateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (ok bool, err error) {
	var v stratus.LoadBalancerValidator
	if raw, isValidator := p.raw.(stratus.LoadBalancerValidator); isValidator {
		v = raw
	} else if lb, supported := p.raw.LoadBalancer(); supported {
		v, _ = lb.(stratus.LoadBalancerValidator)
	}
	if v == nil {
		return false, nil
	}
	err = callErr(ctx, p, "ValidateLoadBalancer", func(ctx context.Context) error {
		return v.ValidateLoadBalancer(ctx, clusterName, svc)
	})
	if errors.Is(err, cloudprovider.NotImplemented) {
		return false, nil
	}
	return true, err
}

// LoadBalancerClasses returns the load-balancer classes the set's providers
// serve, sorted.
func (s *Set) LoadBalancerClasses() []string {
	return slices.Sorted(maps.Keys(s.classes))
}
