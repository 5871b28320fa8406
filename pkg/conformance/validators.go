package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// validatorScenarios check stratus.LoadBalancerValidator, the dry run
// stratus's admission webhook asks before a Service is stored, and that it
// agrees with the declared stratus.LoadBalancerCapabilities.
func validatorScenarios() []Scenario {
	return slices.Concat(
		validatorAcceptScenarios(),
		validatorRefusalScenarios(),
	)
}

// What the dry run's scenarios need.
var (
	needsValidator       = []Need{NeedLoadBalancer, NeedLoadBalancerValidator}
	needsValidatorDriver = []Need{NeedLoadBalancer, NeedLoadBalancerValidator, NeedLoadBalancerDriver}
	needsValidatorCaps   = []Need{NeedLoadBalancer, NeedLoadBalancerValidator, NeedLoadBalancerCapabilities}
)

// validatorAcceptScenarios check what the dry run accepts.
func validatorAcceptScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancervalidator/accepts-valid", Needs: needsValidator, Doc: "The dry run accepts a Service with one TCP port and creates nothing.",
			run: func(ctx context.Context, e *env) error {
				svc := e.service()
				if err := e.mirror(ctx, svc); err != nil {
					return err
				}
				if err := e.dryRun(ctx, svc); isSkip(err) {
					return err
				} else if err != nil {
					return expected("ValidateLoadBalancer of a valid Service", "nil", err)
				}
				return e.wantLB(ctx, e.cfg.ClusterName, svc, false)
			}},
		{Name: "loadbalancervalidator/agrees-with-ensure", Needs: needsValidator, Doc: "A Service the dry run accepted is ensured, and its dry run still accepts it once the load balancer exists (an update's).",
			run: func(ctx context.Context, e *env) error {
				nodes, _, err := e.nodes(ctx, 1)
				if err != nil {
					return err
				}
				svc := e.service()
				if err := e.dryRun(ctx, svc); isSkip(err) {
					return err
				} else if err != nil {
					return expected("ValidateLoadBalancer before the create", "nil", err)
				}
				if _, err := e.ensure(ctx, e.cfg.ClusterName, svc, nodes); err != nil {
					return fmt.Errorf("the dry run accepted the Service, but: %w", err)
				}
				if err := e.dryRun(ctx, svc); err != nil {
					return expected("ValidateLoadBalancer of the existing load balancer", "nil", err)
				}
				return nil
			}},
	}
}

// validatorRefusalScenarios check what the dry run refuses and the protocols it declares.
func validatorRefusalScenarios() []Scenario {
	return []Scenario{
		{Name: "loadbalancervalidator/rejects-unsupported", Needs: needsValidatorDriver, Doc: "Every setting the driver lists as unsupported is refused by the dry run with a stratus.RejectedError naming the field, and nothing is created.",
			run: func(ctx context.Context, e *env) error {
				unsup := e.lbd.Unsupported()
				if len(unsup) == 0 {
					return skip("the driver lists no unsupported settings")
				}
				var errs []error
				for _, u := range unsup {
					svc := e.service()
					u.Apply(svc)
					if err := e.mirror(ctx, svc); err != nil {
						return err
					}
					err := e.dryRun(ctx, svc)
					switch {
					case isSkip(err):
						return err
					case !stratus.IsRejected(err):
						errs = append(errs, expected("ValidateLoadBalancer with unsupported "+u.Field, "a stratus.RejectedError", err))
					case !strings.Contains(err.Error(), u.Field):
						errs = append(errs, expected("refusal of unsupported "+u.Field, "a message naming "+u.Field, err.Error()))
					}
					if err := e.wantLB(ctx, e.cfg.ClusterName, svc, false); err != nil {
						errs = append(errs, err)
					}
				}
				return errors.Join(errs...)
			}},
		{Name: "loadbalancervalidator/declared-protocols", Needs: needsValidatorCaps, Doc: "The dry run accepts a port of each protocol the provider declares and refuses, naming spec.ports[0].protocol, each of TCP, UDP and SCTP it does not.",
			run: func(ctx context.Context, e *env) error {
				var errs []error
				for _, p := range []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP} {
					svc := e.service()
					svc.Spec.Ports[0].Protocol = p
					if err := e.mirror(ctx, svc); err != nil {
						return err
					}
					err := e.dryRun(ctx, svc)
					declared := slices.Contains(e.lbCaps.Protocols, p)
					switch {
					case isSkip(err):
						return err
					case declared && err != nil:
						errs = append(errs, expected("ValidateLoadBalancer of a declared protocol "+string(p), "nil", err))
					case !declared && (!stratus.IsRejected(err) || !strings.Contains(err.Error(), "spec.ports[0].protocol")):
						errs = append(errs, expected("ValidateLoadBalancer of an undeclared protocol "+string(p), "a stratus.RejectedError naming spec.ports[0].protocol", err))
					}
				}
				return errors.Join(errs...)
			}},
	}
}

// validation returns the dry run and the declared capabilities of the
// provider raw or its load balancers lb (nil when lb is): the provider's
// own first, as stratus's cloud layer looks for them.
func validation(raw any, lb any) (stratus.LoadBalancerValidator, *stratus.LoadBalancerCapabilities) {
	if lb == nil {
		return nil, nil
	}
	v, ok := raw.(stratus.LoadBalancerValidator)
	if !ok {
		v, _ = lb.(stratus.LoadBalancerValidator)
	}
	c, ok := raw.(stratus.LoadBalancerCapable)
	if !ok {
		c, _ = lb.(stratus.LoadBalancerCapable)
	}
	var caps *stratus.LoadBalancerCapabilities
	if c != nil {
		caps = c.LoadBalancerCapabilities()
	}
	return v, caps
}

// dryRun is the provider's dry run of svc; a provider that has none after
// all (a plugin whose provider answers NotImplemented) skips the scenario.
func (e *env) dryRun(ctx context.Context, svc *v1.Service) error {
	err := e.validator.ValidateLoadBalancer(ctx, e.cfg.ClusterName, svc)
	if errors.Is(err, cloudprovider.NotImplemented) {
		// The error names where the plugin listens (a temporary path),
		// which the report would repeat on every run.
		return skip("the provider has no load balancer dry run (NotImplemented)")
	}
	return err
}

// isSkip reports whether err ends the scenario as skipped.
func isSkip(err error) bool {
	var s *skipError
	return errors.As(err, &s)
}
