package openstack

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// LoadBalancerCapabilities is what this provider makes of a Service on
// Octavia (wanted refuses the rest): TCP and UDP listeners, mixed, any
// number; allowed_cidrs for the source ranges; no PROXY protocol, no
// node-port-less members, no requested address.
func (l *loadBalancers) LoadBalancerCapabilities() *stratus.LoadBalancerCapabilities {
	return &stratus.LoadBalancerCapabilities{
		Protocols:      []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP},
		MixedProtocols: true,
		SourceRanges:   true,
	}
}

// ValidateLoadBalancer is the dry run of EnsureLoadBalancer: the Service's
// settings as wanted reads them, its class annotation, and the networks
// the load balancer would be made on, which must exist in Neutron: the VIP
// subnet (subnet-id) and, when set, the floating network
// (floating-network-id), of [LoadBalancer] or of the Service's
// [LoadBalancerClass]. Nothing is created.
func (l *loadBalancers) ValidateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) error {
	withClass, err := l.forService(svc)
	if err != nil {
		return &stratus.RejectedError{Field: "metadata.annotations[" + ClassAnnotation + "]", Err: err}
	}
	if _, err := withClass.wanted(svc, withClass.GetLoadBalancerName(ctx, clusterName, svc)); err != nil {
		return &stratus.RejectedError{Err: err}
	}
	source := "[LoadBalancer]"
	if name, ok := svc.Annotations[ClassAnnotation]; ok {
		source = fmt.Sprintf("[LoadBalancerClass %q] (annotation %s)", name, ClassAnnotation)
	}
	nc, err := l.c.networkClient(ctx)
	if err != nil {
		return err
	}
	if id := withClass.cfg.SubnetID; id != "" {
		if err := subnets.Get(ctx, nc, id).Err; err != nil {
			return missing(err, "the VIP subnet %s (subnet-id of %s)", id, source)
		}
	}
	if id := withClass.cfg.FloatingNetworkID; id != "" {
		if err := networks.Get(ctx, nc, id).Err; err != nil {
			return missing(err, "the floating network %s (floating-network-id of %s)", id, source)
		}
	}
	return nil
}

// missing is a rejection when err is Neutron's 404 for what, else err as
// the cloud layer must see it (the dry run could not tell).
func missing(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return stratus.Reject("", "%s does not exist in Neutron: fix cloud.conf, or choose another class", what)
	}
	return classify("look up "+what, err)
}
