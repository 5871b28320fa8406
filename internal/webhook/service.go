package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	servicehelpers "k8s.io/cloud-provider/service/helpers"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/annotations"
	"github.com/stratus-ccm/stratus/pkg/echo"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// DefaultDryRunTimeout bounds a provider's dry run: the API server waits for
// the whole review at most the webhook's timeoutSeconds (5 s in the chart).
const DefaultDryRunTimeout = 3 * time.Second

// sourceRangesAnnotation is Kubernetes's older way to set
// spec.loadBalancerSourceRanges.
const sourceRangesAnnotation = v1.AnnotationLoadBalancerSourceRangesKey

// Problem is one reason a Service is refused.
type Problem struct {
	// Field is the path of the field at fault (spec.ports[0].protocol,
	// metadata.annotations[service.stratus.io/...]), or "" when the problem
	// is the load balancer as a whole.
	Field string
	// Message says what is wrong and what would be accepted.
	Message string
}

// String is the field, then the message.
func (p Problem) String() string {
	if p.Field == "" {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

// Validator checks LoadBalancer Services against the providers of one
// manager.
type Validator struct {
	// Clouds are the manager's providers; ForService picks a Service's.
	Clouds *cloud.Set
	// ClusterName is --cluster-name, as the dry run needs it.
	ClusterName string
	// DryRunTimeout bounds the provider's dry run (DefaultDryRunTimeout
	// when 0).
	DryRunTimeout time.Duration
}

// Validate returns the problems of svc (nil when it is admitted) and the
// warnings to show the client. old is the stored Service for an update, nil
// for a create: then only the problems the update adds count, and the
// provider's dry run runs only when a setting of the load balancer changed.
func (v *Validator) Validate(ctx context.Context, old, svc *v1.Service) ([]Problem, []string) {
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return nil, nil
	}
	if old != nil && old.Spec.Type != v1.ServiceTypeLoadBalancer {
		old = nil // it becomes a load balancer now: everything is new
	}
	p := v.Clouds.ForService(svc)
	problems, warnings := v.static(p, svc)
	if old != nil {
		before, _ := v.static(v.Clouds.ForService(old), old)
		problems = slices.DeleteFunc(problems, func(pr Problem) bool { return slices.Contains(before, pr) })
	}
	if len(problems) > 0 || p == nil || (old != nil && !loadBalancerChanged(old, svc)) {
		return problems, warnings
	}
	pr, warning := v.dryRun(ctx, p, svc)
	if pr != nil {
		problems = append(problems, *pr)
	}
	if warning != "" {
		warnings = append(warnings, warning)
	}
	return problems, warnings
}

// static is every check but the dry run: the annotations, the class and
// what p declares it can do (p is nil when no provider of the manager
// serves svc).
func (v *Validator) static(p *cloud.Provider, svc *v1.Service) ([]Problem, []string) {
	problems := annotationProblems(svc)
	warnings := annotations.Warnings(svc)
	if p == nil {
		if c := svc.Spec.LoadBalancerClass; c != nil {
			served := "none"
			if classes := v.Clouds.LoadBalancerClasses(); len(classes) > 0 {
				served = strings.Join(classes, ", ")
			}
			warnings = append(warnings, fmt.Sprintf("spec.loadBalancerClass: no provider of this cloud controller manager serves %q (it serves: %s); "+
				"the Service is admitted for another controller to serve, unchecked", *c, served))
		}
		return problems, warnings
	}
	if caps, ok := p.LoadBalancerCapabilities(); ok {
		problems = append(problems, capabilityProblems(p.Name(), caps, svc)...)
	}
	if proxy, _, err := annotations.LBProxyProtocol.Get(svc); err == nil && proxy && !hasProtocol(svc, v1.ProtocolTCP) {
		warnings = append(warnings, fmt.Sprintf("metadata.annotations[%s]: has no effect: the PROXY protocol header is sent on TCP ports, and the Service has none", annotations.LBProxyProtocol.Name))
	}
	return problems, warnings
}

// annotationProblems are the registry's complaints about svc's stratus
// annotations, one per annotation.
func annotationProblems(svc *v1.Service) []Problem {
	err := annotations.Validate(svc)
	if err == nil {
		return nil
	}
	var out []Problem
	var each []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		each = joined.Unwrap()
	} else {
		each = []error{err}
	}
	for _, e := range each {
		var ie *annotations.InvalidError
		if !errors.As(e, &ie) {
			out = append(out, Problem{Field: "metadata.annotations", Message: e.Error()})
			continue
		}
		msg := ie.Err.Error()
		if !strings.HasPrefix(msg, "unknown stratus annotation") {
			msg = "invalid value " + echo.Quote(ie.Value, echo.MaxValue) + ": " + msg
		}
		out = append(out, Problem{Field: annotationField(echo.Shorten(ie.Name, echo.MaxName)), Message: msg})
	}
	return out
}

func annotationField(name string) string { return "metadata.annotations[" + name + "]" }

// capabilityProblems are the settings of svc that provider name declares
// it cannot implement.
func capabilityProblems(name string, caps stratus.LoadBalancerCapabilities, svc *v1.Service) []Problem {
	var out []Problem
	add := func(field, format string, args ...any) {
		out = append(out, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if caps.MaxPorts > 0 && len(svc.Spec.Ports) > caps.MaxPorts {
		add("spec.ports", "%d ports; provider %q serves at most %d on one load balancer", len(svc.Spec.Ports), name, caps.MaxPorts)
	}
	supported := protocolNames(caps.Protocols)
	var seen []v1.Protocol
	for i, port := range svc.Spec.Ports {
		proto := protocolOf(port)
		if !slices.Contains(caps.Protocols, proto) {
			add(fmt.Sprintf("spec.ports[%d].protocol", i), "%s is not supported by provider %q (supported: %s)", proto, name, strings.Join(supported, ", "))
		}
		if !slices.Contains(seen, proto) {
			seen = append(seen, proto)
		}
	}
	if len(seen) > 1 && !caps.MixedProtocols {
		add("spec.ports", "provider %q cannot mix protocols (%s) on one load balancer: use one protocol per Service", name, strings.Join(protocolNames(seen), " and "))
	}
	if !caps.SourceRanges {
		if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
			add("spec.loadBalancerSourceRanges", "provider %q cannot restrict client addresses: remove the field (a NetworkPolicy can restrict them)", name)
		} else if _, ok := svc.Annotations[sourceRangesAnnotation]; ok {
			add(annotationField(sourceRangesAnnotation), "provider %q cannot restrict client addresses: remove the annotation (a NetworkPolicy can restrict them)", name)
		}
	}
	if proxy, _, err := annotations.LBProxyProtocol.Get(svc); err == nil && proxy && !caps.ProxyProtocol {
		add(annotationField(annotations.LBProxyProtocol.Name), "provider %q cannot send the PROXY protocol (ipMode: Proxy): remove the annotation or set it to false", name)
	}
	if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a && !caps.WithoutNodePorts {
		add("spec.allocateLoadBalancerNodePorts", "false is not supported by provider %q: its load balancers forward to node ports; remove the field or set it to true", name)
	}
	if svc.Spec.LoadBalancerIP != "" && !caps.LoadBalancerIP {
		add("spec.loadBalancerIP", "provider %q allocates load balancer addresses itself: remove the field", name)
	}
	return out
}

// dryRun asks p whether it would accept svc's load balancer: a problem when
// it would not, a warning when it cannot tell (nothing when it has no dry
// run).
func (v *Validator) dryRun(ctx context.Context, p *cloud.Provider, svc *v1.Service) (*Problem, string) {
	timeout := v.DryRunTimeout
	if timeout <= 0 {
		timeout = DefaultDryRunTimeout
	}
	ctx, cancel := context.WithTimeout(cloud.WithPriority(ctx, cloud.PriorityLBWrite), timeout)
	defer cancel()
	ok, err := p.ValidateLoadBalancer(ctx, v.ClusterName, svc)
	switch {
	case !ok || err == nil:
		return nil, ""
	case stratus.IsRejected(err):
		var r *stratus.RejectedError
		errors.As(err, &r)
		return &Problem{Field: r.Field, Message: fmt.Sprintf("provider %q would not accept the load balancer: %s", p.Name(), echo.Shorten(r.Err.Error(), echo.MaxMessage))}, ""
	default:
		return nil, fmt.Sprintf("provider %q could not check the load balancer now (%s): the Service is admitted unchecked",
			p.Name(), echo.Shorten(err.Error(), echo.MaxMessage))
	}
}

// loadBalancerChanged reports whether an update changes what the load
// balancer is made of; other updates (labels, selectors) need no dry run.
func loadBalancerChanged(old, svc *v1.Service) bool {
	return !equality.Semantic.DeepEqual(old.Spec.Ports, svc.Spec.Ports) ||
		!equality.Semantic.DeepEqual(old.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass) ||
		!equality.Semantic.DeepEqual(old.Spec.LoadBalancerSourceRanges, svc.Spec.LoadBalancerSourceRanges) ||
		!equality.Semantic.DeepEqual(old.Spec.AllocateLoadBalancerNodePorts, svc.Spec.AllocateLoadBalancerNodePorts) ||
		old.Spec.LoadBalancerIP != svc.Spec.LoadBalancerIP ||
		servicehelpers.RequestsOnlyLocalTraffic(old) != servicehelpers.RequestsOnlyLocalTraffic(svc) ||
		old.Spec.HealthCheckNodePort != svc.Spec.HealthCheckNodePort ||
		!equality.Semantic.DeepEqual(old.Annotations, svc.Annotations)
}

func protocolOf(p v1.ServicePort) v1.Protocol {
	if p.Protocol == "" {
		return v1.ProtocolTCP
	}
	return p.Protocol
}

func hasProtocol(svc *v1.Service, proto v1.Protocol) bool {
	return slices.ContainsFunc(svc.Spec.Ports, func(p v1.ServicePort) bool { return protocolOf(p) == proto })
}

func protocolNames(ps []v1.Protocol) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}
