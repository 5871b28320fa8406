package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	pb "github.com/stratus-ccm/stratus/proto/stratus/provider/v1"
)

// lbExtension returns the provider's, or else its LoadBalancer's,
// implementation of the extension T.
func lbExtension[T any](p cloudprovider.Interface) (T, bool) {
	if x, ok := p.(T); ok {
		return x, true
	}
	if lb, ok := p.LoadBalancer(); ok && lb != nil {
		if x, ok := lb.(T); ok {
			return x, true
		}
	}
	var zero T
	return zero, false
}

// addLoadBalancerValidation declares the provider's dry run and load
// balancer capabilities in caps.
func addLoadBalancerValidation(p cloudprovider.Interface, caps *pb.Capabilities) {
	if _, ok := lbExtension[stratus.LoadBalancerValidator](p); ok {
		caps.Extensions = append(caps.Extensions, pb.Extension_EXTENSION_LOAD_BALANCER_VALIDATOR)
	}
	c, ok := lbExtension[stratus.LoadBalancerCapable](p)
	if !ok {
		return
	}
	declared := c.LoadBalancerCapabilities()
	if declared == nil {
		return
	}
	out := &pb.LoadBalancerCapabilities{
		MixedProtocols:   proto.Bool(declared.MixedProtocols),
		MaxPorts:         proto.Uint32(uint32(max(0, declared.MaxPorts))),
		SourceRanges:     proto.Bool(declared.SourceRanges),
		ProxyProtocol:    proto.Bool(declared.ProxyProtocol),
		WithoutNodePorts: proto.Bool(declared.WithoutNodePorts),
		LoadBalancerIp:   proto.Bool(declared.LoadBalancerIP),
	}
	for _, pr := range declared.Protocols {
		out.Protocols = append(out.Protocols, string(pr))
	}
	caps.LoadBalancerCapabilities = out
}

// ValidateLoadBalancer answers the dry run: a refusal is a reply, any other
// error a status.
func (s *server) ValidateLoadBalancer(ctx context.Context, req *pb.LoadBalancerRequest) (*pb.ValidateLoadBalancerResponse, error) {
	v, ok := lbExtension[stratus.LoadBalancerValidator](s.p)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "the provider has no load balancer dry run")
	}
	svc, _, err := decodeLBRequest(req.ClusterName, req.Service, nil)
	if err != nil {
		return nil, err
	}
	err = v.ValidateLoadBalancer(ctx, req.GetClusterName(), svc)
	var r *stratus.RejectedError
	switch {
	case err == nil:
		return &pb.ValidateLoadBalancerResponse{Accepted: proto.Bool(true)}, nil
	case errors.As(err, &r):
		return &pb.ValidateLoadBalancerResponse{Accepted: proto.Bool(false), Field: proto.String(r.Field), Reason: proto.String(r.Err.Error())}, nil
	}
	return nil, toStatus(err)
}

// LoadBalancerCapabilities is what the plugin declared when it connected,
// nil when it declared nothing.
func (l loadBalancer) LoadBalancerCapabilities() *stratus.LoadBalancerCapabilities {
	c := l.c.caps.GetLoadBalancerCapabilities()
	if c == nil {
		return nil
	}
	out := &stratus.LoadBalancerCapabilities{
		MixedProtocols:   c.GetMixedProtocols(),
		MaxPorts:         int(c.GetMaxPorts()),
		SourceRanges:     c.GetSourceRanges(),
		ProxyProtocol:    c.GetProxyProtocol(),
		WithoutNodePorts: c.GetWithoutNodePorts(),
		LoadBalancerIP:   c.GetLoadBalancerIp(),
	}
	for _, p := range c.Protocols {
		out.Protocols = append(out.Protocols, v1.Protocol(p))
	}
	return out
}

// ValidateLoadBalancer is the plugin's dry run, or NotImplemented when its
// provider has none.
func (l loadBalancer) ValidateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) error {
	if !slices.Contains(l.c.caps.Extensions, pb.Extension_EXTENSION_LOAD_BALANCER_VALIDATOR) {
		return fmt.Errorf("plugin %s: ValidateLoadBalancer: %w", l.c.addr, cloudprovider.NotImplemented)
	}
	req, err := l.request(clusterName, svc)
	if err != nil {
		return err
	}
	resp, err := invoke(ctx, l.c, "ValidateLoadBalancer", func(ctx context.Context) (*pb.ValidateLoadBalancerResponse, error) {
		return l.c.rpc.ValidateLoadBalancer(ctx, req)
	})
	if err != nil {
		return err
	}
	if resp.Accepted == nil {
		return l.c.missing("ValidateLoadBalancer", "accepted")
	}
	if resp.GetAccepted() {
		return nil
	}
	return &stratus.RejectedError{Field: resp.GetField(), Err: errors.New(resp.GetReason())}
}
