package service

// What a load balancer is made of (lbConfig), the Service changes that
// re-ensure it (needsUpdate), and the fingerprint of it that a Ready
// condition carries, from which a load balancer is adopted at start-up.

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fingerprint identifies the configuration a load balancer was ensured from: the
// provider and what the Service asks of its load balancer (lbConfigOf: the fields
// whose change re-ensures it while the controller runs). The Ready condition's
// message carries it, so that after a restart or a leader change the controller
// can tell that a load balancer is already ensured as the Service asks and skip
// the EnsureLoadBalancer call upstream makes for every load balancer at start-up.
//
// The backend set is not part of it: a backend update would otherwise have to
// write every Service's status. An adopted load balancer's backends are sent
// again by the node syncer's next pass instead (svcState.unverified).
func fingerprint(provider string, svc *v1.Service) string {
	h := fnv.New64a()
	// Maps marshal with sorted keys: the encoding is deterministic.
	err := json.NewEncoder(h).Encode(struct {
		Provider string
		Config   lbConfig
	}{provider, lbConfigOf(svc)})
	if err != nil {
		return "" // cannot happen for these types; an empty fingerprint never matches
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

const fingerprintPrefix = " (configuration "

func withFingerprint(msg, fp string) string { return msg + fingerprintPrefix + fp + ")" }

// adoptable reports whether svc's load balancer was ensured, by this or an
// earlier run of the controller, from exactly the configuration fp: our
// finalizer, an ingress, and a Ready (or NoBackends) condition carrying fp. (The
// fingerprint, not a generation, says what was ensured: Services have no
// metadata.generation, and spec changes that do not concern the load balancer,
// such as the selector, need no re-ensure.)
func adoptable(svc *v1.Service, fp string) bool {
	if fp == "" || !hasFinalizer(svc) || len(svc.Status.LoadBalancer.Ingress) == 0 {
		return false
	}
	c := meta.FindStatusCondition(svc.Status.Conditions, ConditionLoadBalancerReady)
	return c != nil && (c.Reason == ReasonReady || c.Reason == ReasonNoBackends) &&
		strings.HasSuffix(c.Message, fingerprintPrefix+fp+")")
}

// needsUpdate is upstream's test for Service changes that require a new ensure:
// a change of what the load balancer is made of (lbConfigOf), as long as the old
// or the new Service wants a load balancer.
func needsUpdate(old, new *v1.Service) bool {
	if !wantsLB(old) && !wantsLB(new) {
		return false
	}
	return !reflect.DeepEqual(lbConfigOf(old), lbConfigOf(new))
}

// lbConfig is what a load balancer is made of, as far as the controller can tell:
// the Service fields upstream re-ensures on (plus the class, immutable while the
// type is LoadBalancer). Labels, selector, status, finalizers,
// allocateLoadBalancerNodePorts by itself (its node ports are here),
// internalTrafficPolicy, ipFamilyPolicy and clusterIPs are not part of it.
type lbConfig struct {
	UID                   types.UID
	WantsLB               bool
	Class                 *string
	SourceRanges          []string
	Ports                 []lbPort
	SessionAffinity       v1.ServiceAffinity
	SessionAffinityConfig *v1.SessionAffinityConfig
	LoadBalancerIP        string
	ExternalIPs           []string
	Annotations           map[string]string
	ExternalTraffic       v1.ServiceExternalTrafficPolicy
	HealthCheckNodePort   int32
	IPFamilies            int // the number only: the primary family is immutable
}

// lbPort is the part of a port a load balancer is built from.
type lbPort struct {
	Name        string
	Protocol    v1.Protocol
	Port        int32
	NodePort    int32
	TargetPort  intstr.IntOrString
	AppProtocol *string
}

func lbConfigOf(svc *v1.Service) lbConfig {
	c := lbConfig{
		UID:                   svc.UID,
		WantsLB:               wantsLB(svc),
		Class:                 svc.Spec.LoadBalancerClass,
		SourceRanges:          svc.Spec.LoadBalancerSourceRanges,
		SessionAffinity:       svc.Spec.SessionAffinity,
		SessionAffinityConfig: svc.Spec.SessionAffinityConfig,
		LoadBalancerIP:        svc.Spec.LoadBalancerIP,
		Annotations:           svc.Annotations,
		ExternalTraffic:       svc.Spec.ExternalTrafficPolicy,
		HealthCheckNodePort:   svc.Spec.HealthCheckNodePort,
		IPFamilies:            len(svc.Spec.IPFamilies),
	}
	if len(svc.Spec.ExternalIPs) > 0 {
		c.ExternalIPs = svc.Spec.ExternalIPs
	}
	for _, p := range svc.Spec.Ports {
		c.Ports = append(c.Ports, lbPort{p.Name, p.Protocol, p.Port, p.NodePort, p.TargetPort, p.AppProtocol})
	}
	return c
}
