package minicloud

import (
	"context"
	"errors"
	"net/http"

	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// LoadBalancerCapabilities is what minicloud's load balancers do (specOf
// refuses the rest): TCP and UDP listeners, mixed on one load balancer, any
// number of them; source ranges and the PROXY protocol; no node-port-less
// backends and no requested address.
func (l *loadBalancers) LoadBalancerCapabilities() *stratus.LoadBalancerCapabilities {
	return &stratus.LoadBalancerCapabilities{
		Protocols:      []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP},
		MixedProtocols: true,
		SourceRanges:   true,
		ProxyProtocol:  true,
	}
}

// ValidateLoadBalancer is the dry run of EnsureLoadBalancer: the Service's
// load balancer as specOf builds it, checked by minicloud's validate
// endpoint, which answers as a create would (an invalid listener or health
// check, no free VIP) or, when the load balancer exists, as its update.
// Targets are left out: they are the nodes', not the Service's.
func (l *loadBalancers) ValidateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) error {
	spec, err := specOf(clusterName, svc)
	if err != nil {
		return &stratus.RejectedError{Err: err}
	}
	err = l.api.ValidateLoadBalancer(ctx, spec)
	var ce *client.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && ce.StatusCode == http.StatusConflict:
		return stratus.Reject("", "minicloud has no free load balancer address (%s): delete a load balancer or give minicloud a larger VIP range", ce.Message)
	case errors.As(err, &ce) && ce.StatusCode == http.StatusBadRequest:
		return stratus.Reject("", "minicloud refuses it: %s", ce.Message)
	}
	return classify("validate load balancer", err)
}
