package stratus

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// LoadBalancerCapabilities declares what a provider's load balancers can
// do. stratus's admission webhook rejects a LoadBalancer Service that asks
// for more, before it is stored, with a message naming the field; without a
// declaration (an upstream provider) only the generic checks run and the
// provider finds out when it is asked to ensure the load balancer.
type LoadBalancerCapabilities struct {
	// Protocols are the port protocols a load balancer serves (TCP, UDP,
	// SCTP).
	Protocols []v1.Protocol
	// MixedProtocols is true when one load balancer may serve ports of
	// different protocols (TCP and UDP on port 53, say).
	MixedProtocols bool
	// MaxPorts is the most ports (listeners) one load balancer may have; 0
	// is no limit.
	MaxPorts int
	// SourceRanges is true when spec.loadBalancerSourceRanges (and the
	// service.beta.kubernetes.io/load-balancer-source-ranges annotation) is
	// enforced by the load balancer.
	SourceRanges bool
	// ProxyProtocol is true when the load balancer can send the PROXY
	// protocol header (the load-balancer-proxy-protocol annotation) and
	// reports ipMode: Proxy.
	ProxyProtocol bool
	// WithoutNodePorts is true when a load balancer can reach its backends
	// without node ports (spec.allocateLoadBalancerNodePorts: false).
	WithoutNodePorts bool
	// LoadBalancerIP is true when a Service may ask for its address
	// (spec.loadBalancerIP).
	LoadBalancerIP bool
}

// LoadBalancerCapable is a provider (or its LoadBalancer implementation)
// that declares its load balancers' capabilities. LoadBalancerCapabilities
// returns nil when it cannot tell (a plugin client whose provider declares
// nothing): then only the generic checks run.
type LoadBalancerCapable interface {
	LoadBalancerCapabilities() *LoadBalancerCapabilities
}

// LoadBalancerValidator is a provider (or its LoadBalancer implementation)
// that can say, without changing anything, whether it would accept the load
// balancer of a Service: a dry run of EnsureLoadBalancer against the
// cloud's real limits (quota, free addresses, listener limits, configured
// networks that must exist). stratus's admission webhook calls it when a
// LoadBalancer Service is created or its load balancer's settings change.
//
// ValidateLoadBalancer returns nil when the cloud would accept it, a
// *RejectedError when it would not (the Service is refused with that
// message), an error wrapping k8s.io/cloud-provider's NotImplemented when it
// has no dry run after all (a plugin client whose provider has none), and any
// other error when it cannot tell (the cloud is unreachable, say): then the
// Service is admitted, with a warning, since the webhook must never stand in
// the way of a cluster.
type LoadBalancerValidator interface {
	ValidateLoadBalancer(ctx context.Context, clusterName string, service *v1.Service) error
}

// RejectedError is a load balancer the cloud would refuse.
type RejectedError struct {
	// Field is the path of the Service field at fault
	// (spec.ports[0].protocol, metadata.annotations[...]); empty when it is
	// no single field (the cloud has no free address).
	Field string
	// Err says why, and what would be accepted.
	Err error
}

// Error is the field, then the reason.
func (e *RejectedError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *RejectedError) Unwrap() error { return e.Err }

// Reject returns a *RejectedError for field with a formatted reason.
func Reject(field, format string, args ...any) error {
	return &RejectedError{Field: field, Err: fmt.Errorf(format, args...)}
}

// IsRejected reports whether err (or an error it wraps) is a
// *RejectedError.
func IsRejected(err error) bool {
	var r *RejectedError
	return errors.As(err, &r)
}
