package minicloud

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// Health check defaults and limits (seconds, probes).
const (
	defaultHealthInterval = 5 * time.Second
	defaultHealthTimeout  = 2 * time.Second
	maxHealthInterval     = 300
	maxHealthTimeout      = 60
	maxUnhealthyThreshold = 10
	maxIdleTimeout        = 3600
)

// validateLBSpec checks spec and normalizes it (source ranges masked).
func validateLBSpec(spec *api.LoadBalancerSpec, create bool) error {
	if create {
		if err := validateName("load balancer", spec.Name); err != nil {
			return err
		}
	}
	if err := validateTags(spec.Tags); err != nil {
		return err
	}
	// A load balancer without listeners has its VIP and binds nothing, as
	// an Octavia load balancer before its first listener.
	type listenerKey struct {
		protocol string
		port     int
	}
	seen := map[listenerKey]bool{}
	for _, l := range spec.Listeners {
		if l.Protocol != api.ProtocolTCP && l.Protocol != api.ProtocolUDP {
			return errInvalid("listener protocol %q: want TCP or UDP", l.Protocol)
		}
		if err := validatePort("listener port", l.Port); err != nil {
			return err
		}
		if err := validatePort("listener target_port", l.TargetPort); err != nil {
			return err
		}
		k := listenerKey{l.Protocol, l.Port}
		if seen[k] {
			return errInvalid("duplicate listener %s/%d", l.Protocol, l.Port)
		}
		seen[k] = true
	}
	if err := validateTargets(spec.Targets); err != nil {
		return err
	}
	if err := validatePoolNames(spec.BackendPools); err != nil {
		return err
	}
	targets := map[api.Target]bool{}
	for _, t := range spec.Targets {
		targets[t] = true
	}
	for i := range spec.Listeners {
		l := &spec.Listeners[i]
		for _, t := range l.Targets {
			if !targets[t] {
				return errInvalid("listener %s/%d: target %+v is not one of the load balancer's targets", l.Protocol, l.Port, t)
			}
		}
		if err := validateRanges(fmt.Sprintf("listener %s/%d source range", l.Protocol, l.Port), l.SourceRanges); err != nil {
			return err
		}
	}
	if hc := spec.HealthCheck; hc != nil {
		if hc.Protocol != api.ProtocolTCP && hc.Protocol != api.ProtocolHTTP {
			return errInvalid("health_check protocol %q: want TCP or HTTP", hc.Protocol)
		}
		if hc.Port != 0 {
			if err := validatePort("health_check port", hc.Port); err != nil {
				return err
			}
		}
		if hc.Path != "" && (hc.Protocol != api.ProtocolHTTP || !strings.HasPrefix(hc.Path, "/") || strings.ContainsAny(hc.Path, " \t\r\n#")) {
			return errInvalid("health_check path %q: an HTTP path starting with '/'", hc.Path)
		}
		if hc.IntervalSeconds < 0 || hc.IntervalSeconds > maxHealthInterval {
			return errInvalid("health_check interval_seconds %d out of range 1-%d", hc.IntervalSeconds, maxHealthInterval)
		}
		if hc.TimeoutSeconds < 0 || hc.TimeoutSeconds > maxHealthTimeout {
			return errInvalid("health_check timeout_seconds %d out of range 1-%d", hc.TimeoutSeconds, maxHealthTimeout)
		}
		// A probe that may outlast the interval would overlap the next one.
		if interval := cmp.Or(time.Duration(hc.IntervalSeconds)*time.Second, defaultHealthInterval); time.Duration(hc.TimeoutSeconds)*time.Second > interval {
			return errInvalid("health_check timeout_seconds %d exceeds the interval (%v)", hc.TimeoutSeconds, interval)
		}
		if hc.UnhealthyThreshold < 0 || hc.UnhealthyThreshold > maxUnhealthyThreshold {
			return errInvalid("health_check unhealthy_threshold %d out of range 1-%d", hc.UnhealthyThreshold, maxUnhealthyThreshold)
		}
	}
	if spec.Algorithm != "" && spec.Algorithm != api.AlgorithmRoundRobin && spec.Algorithm != api.AlgorithmSourceIP {
		return errInvalid("algorithm %q: want %q or %q", spec.Algorithm, api.AlgorithmRoundRobin, api.AlgorithmSourceIP)
	}
	if spec.IdleTimeoutSeconds < 0 || spec.IdleTimeoutSeconds > maxIdleTimeout {
		return errInvalid("idle_timeout_seconds %d out of range 1-%d", spec.IdleTimeoutSeconds, maxIdleTimeout)
	}
	return validateRanges("source range", spec.SourceRanges)
}

// validateTargets checks targets: each names exactly one of an instance and
// an address, and none twice.
func validateTargets(list []api.Target) error {
	targets := map[api.Target]bool{}
	for _, t := range list {
		switch {
		case (t.InstanceID == "") == (t.IP == ""):
			return errInvalid("a target needs exactly one of instance_id and ip")
		case t.IP != "":
			a, err := netip.ParseAddr(t.IP)
			if err != nil || a.Zone() != "" {
				return errInvalid("target ip %q is not an IP address", t.IP)
			}
		}
		if targets[t] {
			return errInvalid("duplicate target %+v", t)
		}
		targets[t] = true
	}
	return nil
}

// validateRanges checks source ranges and writes them masked; what names
// them in errors.
func validateRanges(what string, ranges []string) error {
	for i, r := range ranges {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return errInvalid("%s %q: %v", what, r, err)
		}
		ranges[i] = p.Masked().String()
	}
	return nil
}

// checkRefs verifies that what a load balancer spec refers to exists: its
// instance targets and its backend pools.
func checkRefs(tx *store.Tx, spec api.LoadBalancerSpec) error {
	if err := checkTargets(tx, spec.Targets); err != nil {
		return err
	}
	return checkPools(tx, spec.BackendPools)
}

// checkTargets verifies that instance targets exist.
func checkTargets(tx *store.Tx, targets []api.Target) error {
	for _, t := range targets {
		if t.InstanceID == "" {
			continue
		}
		if !tx.Exists(store.Instances, t.InstanceID) {
			return errInvalid("target instance %q does not exist", t.InstanceID)
		}
	}
	return nil
}
