package service

import (
	"errors"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// A Service's sync, a backend pass and a periodic scan each have three steps,
// kept apart so that the decisions can be tested on their own with any clock:
//
//  1. observe: the Service and the Nodes from the informer cache, and what the
//     provider answers (EnsureLoadBalancer's result, a shared listing of the
//     load balancers provisioning, the cached instance listing that names
//     joining nodes, the periodic listings for drift and orphans);
//  2. plan: a pure function of those observations, now (Options.Clock) and
//     the state the controller keeps between syncs (svcState per Service,
//     passState for the backend passes, the orphans' first sightings),
//     returning actions (planSync, planEnsure, planListing, planEnsureResult,
//     selectBackends, nodeBurst.hold, passState.holdAdds, driftReason,
//     planOrphans);
//  3. apply: the actions carried out against the API server and the cloud
//     (Controller.apply for a Service's actions, the node syncer and the
//     periodic scan for theirs), whose outcomes are fed back into the state.

// phase is where a Service's load balancer stands in this process.
type phase int

const (
	// The zero phase: no Ensure of this incarnation succeeded yet (or none
	// was adopted); node changes and drift checks do not concern it.
	_ phase = iota
	// phaseEnsured: an Ensure succeeded (or the load balancer was adopted):
	// node changes update its backends and the drift check watches it.
	phaseEnsured
	// phaseElsewhere: the provider said another controller implements this
	// load balancer (ImplementedElsewhere); only a successful Ensure brings
	// it back.
	phaseElsewhere
)

// provisioningWait is what an Ensure that answered RetryError leaves behind:
// the fingerprint of the configuration still provisioning and the backend set
// it was sent with, the provider's delay and when the Service is next due for
// a look (only a listing taken then or later answers it). The zero value:
// nothing provisioning.
type provisioningWait struct {
	fp    string
	nodes nodeSet
	retry time.Duration
	due   time.Time
}

// syncStep is what a Service's sync does once its Service is observed.
type syncStep int

const (
	// stepNone: nothing concerns this controller.
	stepNone syncStep = iota
	// stepDeleteVanished: the Service is gone; its load balancer, as last
	// seen, is deleted.
	stepDeleteVanished
	// stepCleanup: the load balancer is deleted, then the finalizer and status.
	stepCleanup
	// stepEnsure: the load balancer is created or updated.
	stepEnsure
)

// syncObs is what a sync observed of its Service.
type syncObs struct {
	// found: the Service exists; served: a provider that does load
	// balancers serves its class.
	found, served bool
	// known: the state holds a Service of this name synced before in this
	// process; recreated: with another UID.
	known, recreated bool
	// knownWantedLB: the known Service wanted a load balancer.
	knownWantedLB bool
	// wantsLB and cleanup are wantsLB and needsCleanup of the Service.
	wantsLB, cleanup bool
}

// syncDecision is planSync's answer: deleteOld asks for the previous
// incarnation's load balancer to be deleted first; firstSight is true when the
// Service was not synced before in this process (adoption is possible).
type syncDecision struct {
	deleteOld  bool
	step       syncStep
	firstSight bool
}

// planSync decides what a sync does with what it observed.
func planSync(o syncObs) syncDecision {
	switch {
	case !o.found:
		return syncDecision{step: stepDeleteVanished}
	case !o.served:
		return syncDecision{} // another controller's class, or ours cannot do it
	}
	d := syncDecision{deleteOld: o.known && o.recreated}
	known := o.known && !o.recreated
	switch {
	case !o.wantsLB && !o.cleanup && (!known || !o.knownWantedLB):
		d.step = stepNone
	case !o.wantsLB || o.cleanup:
		d.step = stepCleanup
	default:
		d.step, d.firstSight = stepEnsure, !known
	}
	return d
}

// ensureStep is how an ensure goes on once the backends are known.
type ensureStep int

const (
	// ensureCall calls EnsureLoadBalancer.
	ensureCall ensureStep = iota
	// ensureAdopt adopts the load balancer without a cloud call: its Ready
	// condition records exactly the current configuration.
	ensureAdopt
	// ensureAskListing asks the provider's shared listing whether the
	// provisioning load balancer is ready.
	ensureAskListing
)

// planEnsure decides how to ensure a Service whose configuration fingerprint
// is fp, with the backends set: adopt it on first sight when its condition
// records fp (its backends are sent again by the next backend pass), ask the
// shared listing while an Ensure of fp with the same backends is
// provisioning, call Ensure otherwise.
func planEnsure(st svcState, firstSight, adoptable bool, fp string, set nodeSet) ensureStep {
	switch {
	case firstSight && adoptable:
		return ensureAdopt
	case st.provisioning.fp != "" && st.provisioning.fp == fp && maps.Equal(st.provisioning.nodes, set):
		return ensureAskListing
	default:
		return ensureCall
	}
}

// actionKind is one thing a Service's sync does.
type actionKind int

const (
	// actEvent records an event on the Service.
	actEvent actionKind = iota
	// actCondition writes the LoadBalancerReady condition; a failed write
	// fails the sync unless bestEffort.
	actCondition
	// actProvisioning remembers wait (a RetryError's, or the next look of a
	// listing); an empty wait forgets it.
	actProvisioning
	// actElsewhere records that another controller implements the load balancer.
	actElsewhere
	// actPublish records the load balancer ensured (phase ensured) and
	// publishes status with cond on the Service.
	actPublish
	// actRequeue syncs the Service again after after.
	actRequeue
	// actFail ends the sync with err (the work queue backs off).
	actFail
)

// action is one step of a Service's plan.
type action struct {
	kind actionKind
	// eventType, reason and message describe an actEvent.
	eventType, reason, message string
	// cond is an actCondition's or actPublish's condition.
	cond       metav1.Condition
	bestEffort bool
	// status is what actPublish publishes.
	status *v1.LoadBalancerStatus
	// wait is what actProvisioning remembers.
	wait provisioningWait
	// after is actRequeue's delay.
	after time.Duration
	// err is actFail's error.
	err error
}

func emit(eventType, reason, message string) action {
	return action{kind: actEvent, eventType: eventType, reason: reason, message: message}
}

// syncFailed is the Warning event of a sync that failed with err.
func syncFailed(err error) action {
	return emit(v1.EventTypeWarning, "SyncLoadBalancerFailed", fmt.Sprintf("Error syncing load balancer: %v", err))
}

// planInvalid is the plan of a Service whose annotations are invalid (err):
// the event and the condition, and no retry: the Service's next change brings
// it back.
func planInvalid(err error) []action {
	return []action{syncFailed(err), {kind: actCondition, cond: notReady(ReasonInvalidConfiguration, err)}}
}

// planEnsured is the plan of a load balancer found ensured from the
// configuration fp with n backends, with status: the event, then the status
// and the condition.
func planEnsured(status *v1.LoadBalancerStatus, n int, fp string) []action {
	return []action{
		emit(v1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer"),
		{kind: actPublish, status: status, cond: readyCondition(n, fp)},
	}
}

// planListing decides, at now, what a shared listing's answer (state, status,
// and wait when state is lbWait) means for a Service whose Ensure of fp is
// provisioning (st.provisioning): ask again when the listing can be taken,
// look again after the provider's delay while the load balancer provisions,
// publish it once it is ready. It returns nil when only EnsureLoadBalancer can
// tell (lbUnknown).
func planListing(now time.Time, st svcState, state lbState, status *v1.LoadBalancerStatus, wait time.Duration, n int, fp string) []action {
	switch state {
	case lbWait:
		return []action{{kind: actRequeue, after: wait}}
	case lbProvisioning:
		w := st.provisioning
		w.due = now.Add(w.retry)
		return []action{{kind: actProvisioning, wait: w}, {kind: actRequeue, after: w.retry}}
	case lbActive:
		return planEnsured(status, n, fp)
	}
	return nil
}

// planEnsureResult decides, at now, what EnsureLoadBalancer's answer (status,
// err) for the configuration fp with the backends set means. readyFP is the
// fingerprint of the Service as sent (its finalizer patch may have brought a
// newer one), which a Ready condition records. hasReady tells whether the
// Service carries a LoadBalancerReady condition; key names the Service in
// errors.
func planEnsureResult(now time.Time, key string, status *v1.LoadBalancerStatus, err error, hasReady bool, set nodeSet, fp, readyFP string) []action {
	var retryErr *cloudproviderapi.RetryError
	switch {
	case errors.Is(err, cloudprovider.ImplementedElsewhere):
		return []action{{kind: actElsewhere}}
	case errors.As(err, &retryErr):
		after := retryErr.RetryAfter()
		out := []action{
			{kind: actProvisioning, wait: provisioningWait{fp: fp, nodes: set, retry: after, due: now.Add(after)}},
			// Progress, not a failure (upstream: Warning SyncLoadBalancerFailed).
			emit(v1.EventTypeNormal, EventProvisioning, fmt.Sprintf("Waiting for the cloud: %v", err)),
		}
		// A Service without the condition (a new one) gets it with its
		// status once provisioning ends: one status write instead of two.
		// One that has it must not keep saying Ready (or a stale error).
		if hasReady {
			out = append(out, action{kind: actCondition, cond: notReady(ReasonProvisioning, err)})
		}
		return append(out, action{kind: actRequeue, after: after})
	case err == nil && status == nil:
		err = errors.New("service status returned by EnsureLoadBalancer is nil")
	case err == nil:
		return planEnsured(status, len(set), readyFP)
	}
	err = fmt.Errorf("ensure load balancer for service %s: %w", key, err)
	return []action{
		{kind: actProvisioning},
		syncFailed(err),
		{kind: actCondition, cond: notReady(ReasonCloudError, err), bestEffort: true},
		{kind: actFail, err: err},
	}
}

// selectBackends picks, at now, the backends among the observed nodes (the
// backend predicates applied, joining nodes named by the instance listing
// where it could): a node still joining that joined less than initWait ago is
// left out while other backends exist. recheck is when the first such node's
// wait ends (0 when none was left out).
func selectBackends(now time.Time, initWait time.Duration, observed []*v1.Node) (nodes []*v1.Node, recheck time.Duration) {
	ready := make([]*v1.Node, 0, len(observed))
	for _, n := range observed {
		if wait := initWait - now.Sub(n.CreationTimestamp.Time); joining(n) && wait > 0 {
			if recheck == 0 || wait < recheck {
				recheck = wait
			}
			continue
		}
		ready = append(ready, n)
	}
	if len(ready) == 0 {
		return observed, 0
	}
	return ready, recheck
}

// passState is what the node syncer remembers between backend passes. Only
// its single work item touches it.
type passState struct {
	// addsHeldSince is when the passes began holding backend additions back
	// for joining nodes (zero when they do not).
	addsHeldSince time.Time
}

// holdAdds decides, at now, whether a pass carries only removals: while nodes
// are joining (recheck > 0, from selectBackends), additions wait until the
// joining nodes are initialized, so that a burst of nodes reaches each load
// balancer in one update rather than in one per initialization window; they
// wait at most initWait. requeue is when the pass must run again (0: only
// when a node changes).
func (s *passState) holdAdds(now time.Time, initWait, recheck time.Duration) (hold bool, requeue time.Duration) {
	if recheck > 0 {
		if s.addsHeldSince.IsZero() {
			s.addsHeldSince = now
		}
		if left := initWait - now.Sub(s.addsHeldSince); left > 0 {
			return true, min(recheck, left)
		}
	}
	s.addsHeldSince = time.Time{}
	// A joining node left out is included when its wait ends, initialized
	// or not.
	return false, recheck
}

// updatesBackends reports whether a pass that holds additions back (hold)
// sends a load balancer whose backends are old the set new.
func updatesBackends(hold bool, old, new nodeSet) bool {
	return !hold || old.removes(new)
}

// driftReason says why a load balancer drifted from its Service svc, given
// what the cloud reports of it (exists, status): "missing", "address" or ""
// when it did not.
func driftReason(exists bool, status *v1.LoadBalancerStatus, svc *v1.Service) string {
	switch {
	case !exists:
		return "missing"
	case status != nil && !sameAddresses(status, &svc.Status.LoadBalancer):
		return "address"
	}
	return ""
}

// orphanKey identifies a listed load balancer.
type orphanKey struct {
	provider string
	name     string
}

// orphan is a load balancer a provider lists as this cluster's whose Service
// is gone.
type orphan struct {
	provider string
	ref      stratus.LoadBalancerRef
}

func (o orphan) key() orphanKey { return orphanKey{o.provider, o.ref.Name} }

// planOrphans decides, at now, which orphans are deleted: those first seen
// (seen, updated here) at least grace ago. announce are those seen for the
// first time. The first sightings of load balancers that are no orphans any
// more are forgotten, except for the providers whose listing failed (failed):
// a failed listing neither starts nor resets clocks. A deletion applied
// forgets its orphan (seen).
func planOrphans(now time.Time, grace time.Duration, seen map[orphanKey]time.Time, failed map[string]bool, gone []orphan) (announce, remove []orphan) {
	candidates := map[orphanKey]bool{}
	for k := range seen {
		if failed[k.provider] {
			candidates[k] = true
		}
	}
	for _, o := range gone {
		k := o.key()
		candidates[k] = true
		first, ok := seen[k]
		if !ok {
			seen[k], first = now, now
			announce = append(announce, o)
		}
		if now.Sub(first) >= grace {
			remove = append(remove, o)
		}
	}
	for k := range seen {
		if !candidates[k] {
			delete(seen, k)
		}
	}
	return announce, remove
}
