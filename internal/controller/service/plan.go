package service

import (
	"errors"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// A Service's sync, a backend pass and a periodic scan each have three steps,
// kept apart so that the decisions can be tested on their own with any clock:
//
//  1. observe: the Service and the Nodes from the informer cache, the state
//     kept, and what the provider answers before anything is written (for a
//     Service: whether its load balancer exists before a cleanup, the shared
//     listing of the load balancers provisioning; for the backend pass: the
//     cached instance listing that names joining nodes; for the periodic
//     scan: the listings for drift and orphans);
//  2. plan: a pure function of those observations, now (Options.Clock) and
//     the state the controller keeps between syncs (svcState per Service,
//     passState for the backend passes, the orphans' first sightings),
//     returning actions. A Service's sync has one plan, planService (built
//     from planSync, planDeleteOld, planCleanup, planEnsure,
//     planEnsureService, planListing): deleting the old load balancer,
//     remembering or forgetting the Service, the finalizer on or off, an
//     adoption, the EnsureLoadBalancer call, events, the condition, the
//     status, a requeue. The backend pass plans with selectBackends,
//     nodeBurst.hold, passState.holdAdds, planPools and updatesBackends, the periodic
//     scan with driftReason and planOrphans;
//  3. apply: the actions carried out against the API server and the cloud,
//     whose outcomes are fed back into the state: Controller.apply is the one
//     place that carries out a Service's plan. What an action's outcome
//     decides is planned by pure functions too: planEnsureResult for
//     EnsureLoadBalancer's answer, planFailure for a failed write. The node
//     syncer and the periodic scan apply theirs.

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

// syncObs is what a sync observed of its Service, as planSync reads it.
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

// planSync decides which step a sync takes with what it observed. Both
// observe (to know what else to look at) and planService read it.
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
// provisioning, call Ensure otherwise. Both observe (to know whether to ask
// the listing) and planService read it.
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

// listingAnswer is the shared provisioning listing's answer for a Service
// (provisioningListings.state): its state, the load balancer's status when
// active, and how long to wait when the listing cannot be taken yet.
type listingAnswer struct {
	state  lbState
	status *v1.LoadBalancerStatus
	wait   time.Duration
}

// observation is everything a Service's sync observed before it acts:
// planService's whole input besides the time. What is observed depends on
// the step (planSync) and, for an ensure, on planEnsure: only what the plan
// reads is looked at.
type observation struct {
	syncObs
	// key names the Service; svc is it as read (nil when gone), served by
	// provider.
	key      types.NamespacedName
	svc      *v1.Service
	provider *cloud.Provider
	// last is the state kept for key: the previous incarnation's when the
	// Service was recreated, the vanished Service's when it is gone.
	last svcState

	// A cleanup's: whether the cloud has the load balancer, or the error
	// of asking.
	exists    bool
	existsErr error

	// An ensure's: the annotations' validation error (when set, nothing
	// below was observed), the error of listing the backends (when set,
	// nothing below it was), the backends and their set, the
	// configuration's fingerprint, whether the Service's condition records
	// it (adoptable), and the shared listing's answer when planEnsure asks
	// it.
	invalid   error
	nodesErr  error
	nodes     []*v1.Node
	set       nodeSet
	fp        string
	adoptable bool
	listing   listingAnswer
	// listedAbsent: a recent listing lacks the load balancer of a Service
	// seen for the first time with our finalizer (provisioningListings.absent);
	// its Ensure is marked stratus.WithLoadBalancerAbsent.
	listedAbsent bool
	// pooled: the provider keeps backend pools (stratus.BackendPools);
	// poolKeys: the keys of the pools the Service's load balancer targets
	// with nodes ("" when it targets none).
	pooled   bool
	poolKeys string
}

// ensureState is the state an ensure starts from: the state kept, or, for a
// recreated Service, the empty state of its new incarnation (the old one's
// is forgotten once its load balancer is deleted).
func (o *observation) ensureState() svcState {
	if o.recreated {
		return svcState{}
	}
	return o.last
}

// actionKind is one thing a Service's sync does.
type actionKind int

const (
	// actEvent records an event on the Service (on its previous
	// incarnation, or the vanished Service, when old).
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
	// actRemember records the Service as observed (and its provider) as the
	// last seen of its name; a new UID starts a new state.
	actRemember
	// actForget drops the state kept for the Service.
	actForget
	// actDeleteOld deletes the load balancer of the Service as last seen
	// (vanished, or replaced by a new incarnation).
	actDeleteOld
	// actDeleteLB deletes the Service's load balancer; a provider that
	// says another controller implements it has nothing to delete.
	actDeleteLB
	// actFinalizer adds our finalizer to the Service (add) or removes it.
	// An Ensure that follows an addition is told that the load balancer
	// does not exist.
	actFinalizer
	// actClearStatus clears the Service's load balancer status and its
	// LoadBalancerReady condition.
	actClearStatus
	// actAdopt records the load balancer ensured without a cloud call,
	// with set as its (unverified) backends, and asks the node syncer for
	// a pass that sends them.
	actAdopt
	// actSent records set as the backend set the coming Ensure sends, with
	// the keys of the backend pools it targets (and the incarnation's first
	// Ensure's time, for the latency metric).
	actSent
	// actEnsure calls EnsureLoadBalancer with nodes; the sync goes on with
	// planEnsureResult of its answer (for the backends set and the
	// configuration fp).
	actEnsure
)

// failEvent is the event a failed action records before the sync ends.
type failEvent int

const (
	// The zero failEvent records none.
	_ failEvent = iota
	// failSyncEvent records Warning SyncLoadBalancerFailed with the
	// wrapped error.
	failSyncEvent
	// failDeleteEvent records Warning DeleteLoadBalancerFailed with the
	// error itself on the Service the action concerns.
	failDeleteEvent
)

// action is one step of a Service's plan.
type action struct {
	kind actionKind
	// eventType, reason and message describe an actEvent; old puts an
	// event, or an actDeleteOld's failure event, on the Service as last
	// seen instead of the observed one.
	eventType, reason, message string
	old                        bool
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
	// add: actFinalizer adds the finalizer (else it removes it).
	add bool
	// nodes, set and fp are the backends and the configuration of
	// actEnsure, actSent and actAdopt; poolKeys the keys of the backend
	// pools actSent records.
	nodes    []*v1.Node
	set      nodeSet
	fp       string
	poolKeys string
	// failWrap is the context a failure of a write is wrapped in ("":
	// none); failEvent the event it records (planFailure).
	failWrap  string
	failEvent failEvent
}

func emit(eventType, reason, message string) action {
	return action{kind: actEvent, eventType: eventType, reason: reason, message: message}
}

// emitOld is emit on the Service as last seen.
func emitOld(eventType, reason, message string) action {
	a := emit(eventType, reason, message)
	a.old = true
	return a
}

// syncFailed is the Warning event of a sync that failed with err.
func syncFailed(err error) action {
	return emit(v1.EventTypeWarning, "SyncLoadBalancerFailed", fmt.Sprintf("Error syncing load balancer: %v", err))
}

// planFailure is what follows when carrying out a failed with err: the
// failure's event (a.failEvent), then the end of the sync with err wrapped
// in a.failWrap. The rest of the plan is dropped.
func planFailure(a action, err error) []action {
	wrapped := err
	if a.failWrap != "" {
		wrapped = fmt.Errorf("%s: %w", a.failWrap, err)
	}
	var out []action
	switch a.failEvent {
	case failSyncEvent:
		out = append(out, syncFailed(wrapped))
	case failDeleteEvent:
		ev := emit(v1.EventTypeWarning, "DeleteLoadBalancerFailed", fmt.Sprintf("Error deleting load balancer: %v", err))
		ev.old = a.old
		out = append(out, ev)
	}
	return append(out, action{kind: actFail, err: wrapped})
}

// planService is a sync's plan: a pure function of what it observed (o) and
// now. The actions run in order (Controller.apply); those that write to the
// cloud or the API server carry what their failure does (planFailure), and
// the Ensure's answer is planned by planEnsureResult when it comes.
//
//   - a Service gone, or recreated under the same name: the load balancer of
//     the Service as last seen is deleted first (planDeleteOld);
//   - then the Service is remembered as observed, and, as planSync decides,
//     cleaned up (planCleanup) or ensured (planEnsureService).
func planService(now time.Time, o *observation) []action {
	d := planSync(o.syncObs)
	var plan []action
	if d.step == stepDeleteVanished || d.deleteOld {
		plan = planDeleteOld(o)
	}
	if d.step == stepNone || d.step == stepDeleteVanished {
		return plan
	}
	plan = append(plan, action{kind: actRemember})
	if d.step == stepCleanup {
		return append(plan, planCleanup(o)...)
	}
	return append(plan, planEnsureService(now, o, d.firstSight)...)
}

// planDeleteOld deletes the load balancer of the Service as last seen (o.last)
// when it wanted one, and forgets its state.
func planDeleteOld(o *observation) []action {
	old := o.last.svc
	if old == nil || !wantsLB(old) {
		return []action{{kind: actForget}}
	}
	return []action{
		emitOld(v1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer"),
		{kind: actDeleteOld, old: true, failEvent: failDeleteEvent,
			failWrap: fmt.Sprintf("delete load balancer of vanished service %s (uid %s)", o.key, old.UID)},
		emitOld(v1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer"),
		{kind: actForget},
	}
}

// planCleanup deletes the load balancer of a Service that no longer wants one
// (or is being deleted) when the cloud has it, then removes the finalizer,
// clears the status and forgets the state. Any failure records
// SyncLoadBalancerFailed and ends the sync.
func planCleanup(o *observation) []action {
	failing := func(a action, what string) action {
		a.failWrap, a.failEvent = fmt.Sprintf("%s of service %s", what, o.key), failSyncEvent
		return a
	}
	if o.existsErr != nil {
		return planFailure(failing(action{}, "failed to check if load balancer exists before cleanup"), o.existsErr)
	}
	var plan []action
	if o.exists {
		plan = append(plan,
			emit(v1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer"),
			failing(action{kind: actDeleteLB}, "delete load balancer"))
	}
	return append(plan,
		failing(action{kind: actFinalizer}, "remove finalizer"),
		emit(v1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer"),
		failing(action{kind: actClearStatus}, "clear status"),
		action{kind: actForget})
}

// planEnsureService creates or updates the load balancer (planEnsure says
// how): a Service with invalid annotations gets planInvalid, one whose
// backends could not be listed fails (to be retried); on first sight, one
// whose Ready condition records the current configuration is adopted; while
// its Ensure provisions, the shared listing's answer is planned
// (planListing); otherwise the finalizer goes on before EnsureLoadBalancer
// is called, and planEnsureResult plans its answer.
func planEnsureService(now time.Time, o *observation, firstSight bool) []action {
	switch {
	case o.invalid != nil:
		return planInvalid(o.invalid)
	case o.nodesErr != nil:
		return []action{{kind: actFail, err: o.nodesErr}}
	}
	st := o.ensureState()
	switch planEnsure(st, firstSight, o.adoptable, o.fp, o.set) {
	case ensureAdopt:
		return []action{{kind: actAdopt, set: o.set}}
	case ensureAskListing:
		l := o.listing
		if plan := planListing(now, st, l.state, l.status, l.wait, len(o.nodes), o.fp); plan != nil {
			return plan
		}
	}
	plan := []action{
		emit(v1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer"),
		// Without our finalizer, which goes on before the first Ensure and
		// off only after the load balancer is deleted, no load balancer
		// exists: the provider may create it without a lookup.
		{kind: actFinalizer, add: true, failWrap: fmt.Sprintf("add finalizer to service %s", o.key)},
	}
	if len(o.nodes) == 0 {
		plan = append(plan, emit(v1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer"))
	}
	return append(plan,
		action{kind: actSent, set: o.set, poolKeys: o.poolKeys},
		action{kind: actEnsure, nodes: o.nodes, set: o.set, fp: o.fp})
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
	// pools are the member sets last sent to backend pools; a pool
	// missing is unknown (never sent in this process, or its update
	// failed) and the next pass sends it.
	pools map[poolRef]nodeSet
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
