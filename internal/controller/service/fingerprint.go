package service

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
