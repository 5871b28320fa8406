package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// The plans' timing behaviour, step by step on a fake clock: what each
// backend pass, sync outcome and orphan scan decides at the time the table
// gives.

// t0 is the fake clocks' start.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// passNode is a node as a backend pass observes it: created at t0+created,
// still joining (uninitialized, no provider ID) or not.
type passNode struct {
	name    string
	created time.Duration
	joining bool
}

func (p passNode) node() *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.name, CreationTimestamp: metav1.NewTime(t0.Add(p.created))}}
	if p.joining {
		n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	} else {
		n.Spec.ProviderID = "fake://" + p.name
	}
	return n
}

// passStep is, at t0+at, a node change (touch) and/or a pass over nodes (nil:
// no pass), and what the pass must decide for one load balancer: "hold D"
// (the changes have not paused), "update [names] requeue D" or "keep requeue
// D" (no UpdateLoadBalancer).
type passStep struct {
	at    time.Duration
	touch bool
	nodes []passNode
	want  string
}

// runPassSteps plays steps on one node syncer's state, as its single work
// item does, for one load balancer whose backends start as sent.
func runPassSteps(t *testing.T, window, initWait time.Duration, sent []string, steps []passStep) {
	t.Helper()
	fc := clocktesting.NewFakeClock(t0)
	var (
		burst nodeBurst
		st    passState
	)
	lb := nodeSet{}
	for _, name := range sent {
		lb[name] = "fake://" + name
	}
	for i, s := range steps {
		fc.SetTime(t0.Add(s.at))
		now := fc.Now()
		if s.touch {
			burst.touch(now)
		}
		if s.nodes == nil {
			continue
		}
		var got string
		if wait := burst.hold(now, window); wait > 0 {
			got = fmt.Sprintf("hold %v", wait)
		} else {
			observed := make([]*v1.Node, 0, len(s.nodes))
			for _, pn := range s.nodes {
				observed = append(observed, pn.node())
			}
			nodes, recheck := selectBackends(now, initWait, observed)
			set := newNodeSet(nodes)
			hold, requeue := st.holdAdds(now, initWait, recheck)
			if !maps.Equal(lb, set) && updatesBackends(hold, lb, set) {
				lb = set
				got = fmt.Sprintf("update %v requeue %v", slices.Sorted(maps.Keys(set)), requeue)
			} else {
				got = fmt.Sprintf("keep requeue %v", requeue)
			}
		}
		if got != s.want {
			t.Errorf("step %d (t0+%v): %s, want %s", i, s.at, got, s.want)
		}
	}
}

func TestBackendPassTiming(t *testing.T) {
	const window, initWait = time.Second, 30 * time.Second
	ready := passNode{name: "n0", created: -time.Hour}
	joining := func(created time.Duration) passNode { return passNode{name: "n1", created: created, joining: true} }
	initialized := passNode{name: "n1"}
	for _, tc := range []struct {
		name  string
		sent  []string
		steps []passStep
	}{
		{"changes coalesced until they pause for a window", []string{"n0"}, []passStep{
			{at: 0, touch: true},
			{at: 500 * time.Millisecond, touch: true},
			{at: time.Second, nodes: []passNode{ready, initialized}, want: "hold 500ms"},
			{at: 1500 * time.Millisecond, nodes: []passNode{ready, initialized}, want: "update [n0 n1] requeue 0s"},
		}},
		{"a steady stream of changes still gets a pass every ten windows", []string{"n0"}, []passStep{
			{at: 0, touch: true},
			{at: 3 * time.Second, touch: true},
			{at: 6 * time.Second, touch: true},
			{at: 9500 * time.Millisecond, touch: true},
			{at: 9900 * time.Millisecond, nodes: []passNode{ready, initialized}, want: "hold 600ms"},
			{at: 10 * time.Second, nodes: []passNode{ready, initialized}, want: "update [n0 n1] requeue 0s"},
		}},
		{"a joining node is held until initialized", []string{"n0"}, []passStep{
			{at: 0, touch: true},
			{at: time.Second, nodes: []passNode{ready, joining(0)}, want: "keep requeue 29s"},
			{at: 5 * time.Second, touch: true},
			{at: 6 * time.Second, nodes: []passNode{ready, initialized}, want: "update [n0 n1] requeue 0s"},
		}},
		{"a joining node that stays uninitialized is added when NodeInitWait has passed", []string{"n0"}, []passStep{
			{at: 0, touch: true},
			{at: time.Second, nodes: []passNode{ready, joining(0)}, want: "keep requeue 29s"},
			{at: 29*time.Second + 999*time.Millisecond, nodes: []passNode{ready, joining(0)}, want: "keep requeue 1ms"},
			{at: 30 * time.Second, nodes: []passNode{ready, joining(0)}, want: "update [n0 n1] requeue 0s"},
		}},
		{"only joining nodes: they are backends at once", nil, []passStep{
			{at: 0, touch: true},
			{at: time.Second, nodes: []passNode{{name: "n0", joining: true}}, want: "update [n0] requeue 0s"},
		}},
		{"a removal does not wait for a joining node", []string{"n0", "n2"}, []passStep{
			{at: 0, touch: true},
			{at: time.Second, nodes: []passNode{ready, joining(0)}, want: "update [n0] requeue 29s"},
		}},
		{"additions held for a burst of joining nodes until the last is initialized", []string{"n0"}, []passStep{
			{at: 0, touch: true},
			{at: time.Second, nodes: []passNode{ready, joining(0), {name: "n2", joining: true}}, want: "keep requeue 29s"},
			{at: 2 * time.Second, touch: true},
			{at: 3 * time.Second, nodes: []passNode{ready, initialized, {name: "n2", joining: true}}, want: "keep requeue 27s"},
			{at: 4 * time.Second, touch: true},
			{at: 5 * time.Second, nodes: []passNode{ready, initialized, {name: "n2"}}, want: "update [n0 n1 n2] requeue 0s"},
		}},
		{"additions held at most NodeInitWait while nodes keep joining", []string{"n0"}, []passStep{
			{at: 0, touch: true},
			{at: time.Second, nodes: []passNode{ready, joining(0)}, want: "keep requeue 29s"},
			{at: 20 * time.Second, touch: true},
			{at: 21 * time.Second, nodes: []passNode{ready, initialized, {name: "n2", created: 15 * time.Second, joining: true}}, want: "keep requeue 10s"},
			{at: 31 * time.Second, nodes: []passNode{ready, initialized, {name: "n2", created: 15 * time.Second, joining: true}}, want: "update [n0 n1] requeue 14s"},
			{at: 45 * time.Second, nodes: []passNode{ready, initialized, {name: "n2", created: 15 * time.Second, joining: true}}, want: "update [n0 n1 n2] requeue 0s"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runPassSteps(t, window, initWait, tc.sent, tc.steps) })
	}
}

// describeAction writes a Service plan's action as "kind[ detail]", with
// times relative to t0.
func describeAction(a action) string {
	switch a.kind {
	case actEvent:
		if a.old {
			return "event (old) " + a.eventType + " " + a.reason
		}
		return "event " + a.eventType + " " + a.reason
	case actCondition:
		s := "condition " + a.cond.Reason
		if a.bestEffort {
			s += " (best effort)"
		}
		return s
	case actProvisioning:
		if a.wait.fp == "" {
			return "provisioning done"
		}
		return fmt.Sprintf("provisioning %s retry %v due +%v", a.wait.fp, a.wait.retry, a.wait.due.Sub(t0))
	case actElsewhere:
		return "elsewhere"
	case actPublish:
		return "publish " + a.cond.Reason
	case actRequeue:
		return fmt.Sprintf("requeue %v", a.after)
	case actFail:
		return "fail: " + a.err.Error()
	case actRemember:
		return "remember"
	case actForget:
		return "forget"
	case actDeleteOld:
		return "delete old load balancer" + describeFailure(a)
	case actDeleteLB:
		return "delete load balancer" + describeFailure(a)
	case actFinalizer:
		if a.add {
			return "finalizer add" + describeFailure(a)
		}
		return "finalizer remove" + describeFailure(a)
	case actClearStatus:
		return "clear status" + describeFailure(a)
	case actAdopt:
		return fmt.Sprintf("adopt %v", slices.Sorted(maps.Keys(a.set)))
	case actSent:
		return fmt.Sprintf("sent %v", slices.Sorted(maps.Keys(a.set)))
	case actEnsure:
		names := make([]string, 0, len(a.nodes))
		for _, n := range a.nodes {
			names = append(names, n.Name)
		}
		return fmt.Sprintf("ensure %v %s", names, a.fp)
	}
	return "unknown"
}

// errCloud is the error the descriptions of writes fail with.
var errCloud = errors.New("cloud down")

// describeFailure describes what a write does when it fails with errCloud
// (planFailure).
func describeFailure(a action) string {
	return " / on " + errCloud.Error() + ": " + strings.Join(describeActions(planFailure(a, errCloud)), ", ")
}

func describeActions(plan []action) []string {
	out := make([]string, 0, len(plan))
	for _, a := range plan {
		out = append(out, describeAction(a))
	}
	return out
}

var lbStatus = &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "203.0.113.1"}}}

// A load balancer's provisioning, sync by sync on a fake clock: Ensure
// answers RetryError, the shared listing is asked when the Service is due,
// and its due time moves by the provider's delay each time the listing says
// "still provisioning".
func TestProvisioningTiming(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	retry := cloudproviderapi.NewRetryError("load balancer is provisioning", 2*time.Second)
	var st svcState
	apply := func(plan []action) {
		for _, a := range plan {
			if a.kind == actProvisioning {
				st.provisioning = a.wait
			}
		}
	}
	steps := []struct {
		desc string
		at   time.Duration
		plan func(now time.Time) []action
		want []string
	}{
		{"Ensure answers RetryError", 0, func(now time.Time) []action {
			return planEnsureResult(now, "ns/web", nil, retry, false, nodeSet{"n1": ""}, "fp1", "fp1")
		}, []string{"provisioning fp1 retry 2s due +2s", "event Normal " + EventProvisioning, "requeue 2s"}},
		{"the listing, taken too recently, says when to ask again", 2 * time.Second, func(now time.Time) []action {
			return planListing(now, st, lbWait, nil, 300*time.Millisecond, 1, "fp1")
		}, []string{"requeue 300ms"}},
		{"the listing says it still provisions: due again after the delay", 2300 * time.Millisecond, func(now time.Time) []action {
			return planListing(now, st, lbProvisioning, nil, 0, 1, "fp1")
		}, []string{"provisioning fp1 retry 2s due +4.3s", "requeue 2s"}},
		{"the listing shows it ready: published without an Ensure", 4300 * time.Millisecond, func(now time.Time) []action {
			return planListing(now, st, lbActive, lbStatus, 0, 1, "fp1")
		}, []string{"event Normal EnsuredLoadBalancer", "publish " + ReasonReady}},
	}
	for _, s := range steps {
		fc.SetTime(t0.Add(s.at))
		plan := s.plan(fc.Now())
		if diff := cmp.Diff(s.want, describeActions(plan)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.desc, diff)
		}
		apply(plan)
	}
	if got := planListing(fc.Now(), st, lbUnknown, nil, 0, 1, "fp1"); got != nil {
		t.Errorf("a listing without the load balancer: %v, want nil (Ensure tells)", describeActions(got))
	}
}

func TestPlanEnsureResult(t *testing.T) {
	retry := cloudproviderapi.NewRetryError("load balancer is provisioning", time.Second)
	for _, tc := range []struct {
		name     string
		status   *v1.LoadBalancerStatus
		err      error
		hasReady bool
		nodes    nodeSet
		want     []string
	}{
		{"ensured", lbStatus, nil, false, nodeSet{"n1": "", "n2": ""}, []string{"event Normal EnsuredLoadBalancer", "publish " + ReasonReady}},
		{"ensured without backends", lbStatus, nil, true, nodeSet{}, []string{"event Normal EnsuredLoadBalancer", "publish " + ReasonNoBackends}},
		{"provisioning, Service with a condition", nil, retry, true, nodeSet{"n1": ""},
			[]string{"provisioning fp retry 1s due +1s", "event Normal " + EventProvisioning, "condition " + ReasonProvisioning, "requeue 1s"}},
		{"implemented elsewhere", nil, cloudprovider.ImplementedElsewhere, true, nodeSet{"n1": ""}, []string{"elsewhere"}},
		{"cloud error", nil, errors.New("quota exceeded"), true, nodeSet{"n1": ""}, []string{"provisioning done", "event Warning SyncLoadBalancerFailed",
			"condition " + ReasonCloudError + " (best effort)", "fail: ensure load balancer for service ns/web: quota exceeded"}},
		{"no status", nil, nil, false, nodeSet{"n1": ""}, []string{"provisioning done", "event Warning SyncLoadBalancerFailed",
			"condition " + ReasonCloudError + " (best effort)", "fail: ensure load balancer for service ns/web: service status returned by EnsureLoadBalancer is nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planEnsureResult(t0, "ns/web", tc.status, tc.err, tc.hasReady, tc.nodes, "fp", "fp-sent")
			if diff := cmp.Diff(tc.want, describeActions(plan)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, a := range plan {
				if a.kind == actPublish && !strings.HasSuffix(a.cond.Message, fingerprintPrefix+"fp-sent)") {
					t.Errorf("Ready condition %q does not record the fingerprint of the Service as sent", a.cond.Message)
				}
			}
		})
	}
}

func TestPlanEnsure(t *testing.T) {
	sent := nodeSet{"n1": "fake://n1"}
	provisioning := svcState{provisioning: provisioningWait{fp: "fp1", nodes: sent, retry: time.Second, due: t0}}
	for _, tc := range []struct {
		name       string
		st         svcState
		firstSight bool
		adoptable  bool
		fp         string
		nodes      nodeSet
		want       ensureStep
	}{
		{"first sight of a load balancer ensured from this configuration", svcState{}, true, true, "fp1", sent, ensureAdopt},
		{"adoptable, but synced before", svcState{}, false, true, "fp1", sent, ensureCall},
		{"new configuration", svcState{}, true, false, "fp1", sent, ensureCall},
		{"provisioning this configuration", provisioning, false, false, "fp1", sent, ensureAskListing},
		{"changed while provisioning", provisioning, false, false, "fp2", sent, ensureCall},
		// The fingerprint has no backends: the listing's answer would
		// describe a load balancer with the old ones.
		{"a node joined while provisioning", provisioning, false, false, "fp1", nodeSet{"n1": "fake://n1", "n2": ""}, ensureCall},
	} {
		if got := planEnsure(tc.st, tc.firstSight, tc.adoptable, tc.fp, tc.nodes); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A sync's whole plan, from what it observed: deleting the load balancer of
// the Service as last seen, the finalizer on before the first Ensure and off
// after the deletion, adoption, the Ensure call, the listing's answer while
// provisioning, and what each write does when it fails.
func TestPlanService(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	svc := lbService("web", func(s *v1.Service) { s.Namespace, s.UID = "ns", "u2" })
	oldSvc := lbService("web", func(s *v1.Service) { s.Namespace, s.UID = "ns", "u1" })
	n1 := passNode{name: "n1"}.node()
	backends := []*v1.Node{n1}
	set := newNodeSet(backends)
	provisioning := svcState{svc: svc, phase: phaseEnsured, provisioning: provisioningWait{fp: "fp1", nodes: set, retry: time.Second, due: t0}}
	// ensure is an observation of svc that asks for an ensure, with the
	// state st (whose Service is svc when known).
	ensure := func(st svcState, mutate ...func(*observation)) *observation {
		o := &observation{key: key, svc: svc, last: st, nodes: backends, set: set, fp: "fp1",
			syncObs: syncObs{found: true, served: true, wantsLB: true, known: st.svc != nil}}
		if st.svc != nil {
			o.recreated, o.knownWantedLB = st.svc.UID != svc.UID, wantsLB(st.svc)
		}
		for _, m := range mutate {
			m(o)
		}
		return o
	}
	cleanup := func(mutate ...func(*observation)) *observation {
		o := &observation{key: key, svc: svc, syncObs: syncObs{found: true, served: true, wantsLB: true, cleanup: true}}
		for _, m := range mutate {
			m(o)
		}
		return o
	}
	ensureCall := func(nodes string) []string {
		return []string{
			"event Normal EnsuringLoadBalancer",
			"finalizer add / on cloud down: fail: add finalizer to service ns/web: cloud down",
			"sent " + nodes,
			"ensure " + nodes + " fp1",
		}
	}
	deleteOld := []string{
		"event (old) Normal DeletingLoadBalancer",
		"delete old load balancer / on cloud down: event (old) Warning DeleteLoadBalancerFailed, fail: delete load balancer of vanished service ns/web (uid u1): cloud down",
		"event (old) Normal DeletedLoadBalancer",
		"forget",
	}
	for _, tc := range []struct {
		name string
		o    *observation
		want []string
	}{
		{"new load balancer: the finalizer goes on, then Ensure", ensure(svcState{}),
			append([]string{"remember"}, ensureCall("[n1]")...)},
		{"no backends: the warning, and Ensure all the same", ensure(svcState{}, func(o *observation) { o.nodes, o.set = nil, nodeSet{} }),
			[]string{"remember", "event Normal EnsuringLoadBalancer",
				"finalizer add / on cloud down: fail: add finalizer to service ns/web: cloud down",
				"event Warning UnAvailableLoadBalancer", "sent []", "ensure [] fp1"}},
		{"first sight of a load balancer ensured from this configuration: adopted", ensure(svcState{}, func(o *observation) { o.adoptable = true }),
			[]string{"remember", "adopt [n1]"}},
		{"adoptable, but synced before: ensured", ensure(svcState{svc: svc}, func(o *observation) { o.adoptable = true }),
			append([]string{"remember"}, ensureCall("[n1]")...)},
		{"invalid annotations: no cloud call, no finalizer", ensure(svcState{}, func(o *observation) { o.invalid = errors.New("bad annotation") }),
			[]string{"remember", "event Warning SyncLoadBalancerFailed", "condition " + ReasonInvalidConfiguration}},
		{"the backends cannot be listed: remembered, and the sync fails", ensure(svcState{}, func(o *observation) { o.nodesErr = errors.New("node cache not synced") }),
			[]string{"remember", "fail: node cache not synced"}},
		{"provisioning, the listing shows it ready: published without an Ensure",
			ensure(provisioning, func(o *observation) { o.listing = listingAnswer{state: lbActive, status: lbStatus} }),
			[]string{"remember", "event Normal EnsuredLoadBalancer", "publish " + ReasonReady}},
		{"provisioning, the listing still provisions: looked at again later",
			ensure(provisioning, func(o *observation) { o.listing = listingAnswer{state: lbProvisioning} }),
			[]string{"remember", "provisioning fp1 retry 1s due +1s", "requeue 1s"}},
		{"provisioning, the listing cannot tell: Ensure", ensure(provisioning),
			append([]string{"remember"}, ensureCall("[n1]")...)},
		{"recreated while the old one provisioned: the old load balancer goes, the new one starts afresh",
			ensure(svcState{svc: oldSvc, provider: nil, provisioning: provisioning.provisioning}, func(o *observation) {
				o.listing = listingAnswer{state: lbActive, status: lbStatus} // not asked: the new incarnation has no Ensure pending
			}),
			slices.Concat(deleteOld, []string{"remember"}, ensureCall("[n1]"))},
		{"cleanup of an existing load balancer: deleted, then the finalizer and the status", cleanup(func(o *observation) { o.exists = true }),
			[]string{"remember", "event Normal DeletingLoadBalancer",
				"delete load balancer / on cloud down: event Warning SyncLoadBalancerFailed, fail: delete load balancer of service ns/web: cloud down",
				"finalizer remove / on cloud down: event Warning SyncLoadBalancerFailed, fail: remove finalizer of service ns/web: cloud down",
				"event Normal DeletedLoadBalancer",
				"clear status / on cloud down: event Warning SyncLoadBalancerFailed, fail: clear status of service ns/web: cloud down",
				"forget"}},
		{"cleanup of a load balancer the cloud does not have: the finalizer and the status", cleanup(),
			[]string{"remember",
				"finalizer remove / on cloud down: event Warning SyncLoadBalancerFailed, fail: remove finalizer of service ns/web: cloud down",
				"event Normal DeletedLoadBalancer",
				"clear status / on cloud down: event Warning SyncLoadBalancerFailed, fail: clear status of service ns/web: cloud down",
				"forget"}},
		{"cleanup, the cloud cannot tell whether it exists: nothing written", cleanup(func(o *observation) { o.existsErr = errCloud }),
			[]string{"remember", "event Warning SyncLoadBalancerFailed",
				"fail: failed to check if load balancer exists before cleanup of service ns/web: cloud down"}},
		{"vanished: its load balancer as last seen is deleted", &observation{key: key, last: svcState{svc: oldSvc}}, deleteOld},
		{"vanished without a load balancer: forgotten",
			&observation{key: key, last: svcState{svc: lbService("web", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP })}},
			[]string{"forget"}},
		{"another class: nothing", &observation{key: key, svc: svc, syncObs: syncObs{found: true, wantsLB: true}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, describeActions(planService(t0, tc.o))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// What a failed write does (planFailure): its event, if any, then the end of
// the sync with the error in the write's context; the rest of the plan is
// dropped.
func TestPlanFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    action
		want []string
	}{
		{"a condition write: the error as is", action{kind: actCondition}, []string{"fail: cloud down"}},
		{"the finalizer before an Ensure: no event", action{kind: actFinalizer, add: true, failWrap: "add finalizer to service ns/web"},
			[]string{"fail: add finalizer to service ns/web: cloud down"}},
		{"a cleanup's write: the sync's warning with the wrapped error", action{kind: actClearStatus, failWrap: "clear status of service ns/web", failEvent: failSyncEvent},
			[]string{"event Warning SyncLoadBalancerFailed", "fail: clear status of service ns/web: cloud down"}},
	} {
		got := planFailure(tc.a, errCloud)
		if diff := cmp.Diff(tc.want, describeActions(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if ev := got[0]; tc.a.failEvent == failSyncEvent && !strings.Contains(ev.message, tc.a.failWrap) {
			t.Errorf("%s: event %q does not carry the wrapped error", tc.name, ev.message)
		}
	}
}

func TestPlanSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  syncObs
		want syncDecision
	}{
		{"gone", syncObs{}, syncDecision{step: stepDeleteVanished}},
		{"another class", syncObs{found: true, wantsLB: true}, syncDecision{}},
		{"new load balancer", syncObs{found: true, served: true, wantsLB: true}, syncDecision{step: stepEnsure, firstSight: true}},
		{"known load balancer", syncObs{found: true, served: true, known: true, knownWantedLB: true, wantsLB: true}, syncDecision{step: stepEnsure}},
		{"recreated", syncObs{found: true, served: true, known: true, recreated: true, knownWantedLB: true, wantsLB: true},
			syncDecision{deleteOld: true, step: stepEnsure, firstSight: true}},
		{"recreated without a load balancer", syncObs{found: true, served: true, known: true, recreated: true, knownWantedLB: true},
			syncDecision{deleteOld: true}},
		{"never wanted one", syncObs{found: true, served: true}, syncDecision{}},
		{"no longer wants one", syncObs{found: true, served: true, known: true, knownWantedLB: true}, syncDecision{step: stepCleanup}},
		{"being deleted", syncObs{found: true, served: true, wantsLB: true, cleanup: true}, syncDecision{step: stepCleanup}},
	} {
		if got := planSync(tc.obs); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestDriftReason(t *testing.T) {
	svc := &v1.Service{Status: v1.ServiceStatus{LoadBalancer: *lbStatus}}
	other := &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "203.0.113.9"}}}
	for _, tc := range []struct {
		exists bool
		status *v1.LoadBalancerStatus
		want   string
	}{
		{false, nil, "missing"},
		{true, other, "address"},
		{true, lbStatus, ""},
		{true, nil, ""}, // a listing without statuses
	} {
		if got := driftReason(tc.exists, tc.status, svc); got != tc.want {
			t.Errorf("driftReason(%v, %v) = %q, want %q", tc.exists, tc.status, got, tc.want)
		}
	}
}

// Orphans, scan by scan on a fake clock: deleted once gone for the grace
// period; a failed deletion is retried at the next scan; a failed listing
// keeps the clocks; a load balancer that is no orphan any more is forgotten.
func TestOrphanTiming(t *testing.T) {
	const grace = 5 * time.Minute
	fc := clocktesting.NewFakeClock(t0)
	a := orphan{provider: "p1", ref: stratus.LoadBalancerRef{Name: "a"}}
	b := orphan{provider: "p2", ref: stratus.LoadBalancerRef{Name: "b"}}
	seen := map[orphanKey]time.Time{}
	names := func(os []orphan) []string {
		out := []string{}
		for _, o := range os {
			out = append(out, o.ref.Name)
		}
		return out
	}
	for i, s := range []struct {
		at        time.Duration
		gone      []orphan
		failed    []string
		deleted   bool // the deletions planned are applied
		announce  []string
		remove    []string
		remembers []string
	}{
		{0, []orphan{a}, nil, true, []string{"a"}, []string{}, []string{"a"}},
		{time.Minute, []orphan{a, b}, nil, true, []string{"b"}, []string{}, []string{"a", "b"}},
		{grace - time.Second, []orphan{a, b}, nil, true, []string{}, []string{}, []string{"a", "b"}},
		{grace, []orphan{a, b}, nil, false, []string{}, []string{"a"}, []string{"a", "b"}},
		// p2's listing fails: b's clock is kept, not restarted.
		{grace + time.Minute, []orphan{a}, []string{"p2"}, true, []string{}, []string{"a"}, []string{"b"}},
		{grace + 2*time.Minute, []orphan{b}, nil, true, []string{}, []string{"b"}, []string{}},
		// a is listed again with its Service back, then gone once more: a new clock.
		{grace + 3*time.Minute, nil, nil, true, []string{}, []string{}, []string{}},
		{grace + 4*time.Minute, []orphan{a}, nil, true, []string{"a"}, []string{}, []string{"a"}},
	} {
		fc.SetTime(t0.Add(s.at))
		failed := map[string]bool{}
		for _, p := range s.failed {
			failed[p] = true
		}
		announce, remove := planOrphans(fc.Now(), grace, seen, failed, s.gone)
		if s.deleted {
			for _, o := range remove {
				delete(seen, o.key())
			}
		}
		var remembered []string
		for k := range seen {
			remembered = append(remembered, k.name)
		}
		slices.Sort(remembered)
		if remembered == nil {
			remembered = []string{}
		}
		got := [][]string{names(announce), names(remove), remembered}
		if diff := cmp.Diff([][]string{s.announce, s.remove, s.remembers}, got); diff != "" {
			t.Errorf("scan %d (t0+%v): [announce remove remembered] (-want +got):\n%s", i, s.at, diff)
		}
	}
}

// The shared provisioning listing is taken at most once per freshness on the
// injected clock: a Service due after the last listing waits for the next
// one possible, and gets it once that time has come.
func TestProvisioningListingFreshness(t *testing.T) {
	c := newTestCloud()
	p := cloud.NewProvider("fake", listingCloud{c})
	fc := clocktesting.NewFakeClock(t0)
	l := newProvisioningListings(time.Second, fc)
	ctx := context.Background()
	lists := func() int {
		var n int
		c.set(func(c *testCloud) { n = c.calls["list"] })
		return n
	}
	if state, _, _ := l.state(ctx, p, cloud.DefaultClusterName, "u1", fc.Now()); state != lbUnknown || lists() != 1 {
		t.Fatalf("first ask: %v after %d listings, want unknown after 1", state, lists())
	}
	fc.Step(400 * time.Millisecond)
	if state, _, wait := l.state(ctx, p, cloud.DefaultClusterName, "u1", fc.Now()); state != lbWait || wait != 600*time.Millisecond || lists() != 1 {
		t.Errorf("due after the listing, 400ms later: %v %v after %d listings, want wait 600ms after 1", state, wait, lists())
	}
	if state, _, _ := l.state(ctx, p, cloud.DefaultClusterName, "u1", t0); state != lbUnknown || lists() != 1 {
		t.Errorf("due before the listing: %v after %d listings, want its answer (unknown) after 1", state, lists())
	}
	fc.Step(600 * time.Millisecond)
	if state, _, _ := l.state(ctx, p, cloud.DefaultClusterName, "u1", fc.Now()); state != lbUnknown || lists() != 2 {
		t.Errorf("a second later: %v after %d listings, want a new listing", state, lists())
	}
}

// Services whose last sync failed are synced at once when their provider
// recovers from an outage; other Services and other changes are not.
func TestRecoveredSyncsFailedServices(t *testing.T) {
	p1 := cloud.NewProvider("p1", newTestCloud())
	p2 := cloud.NewProvider("p2", newTestCloud())
	c := &Controller{cache: newServiceCache()}
	for _, s := range []struct {
		name   string
		p      *cloud.Provider
		failed bool
	}{{"failed", p1, true}, {"fine", p1, false}, {"other-provider", p2, true}} {
		svc := lbService(s.name, func(svc *v1.Service) { svc.Namespace, svc.UID = "ns", types.UID("uid-"+s.name) })
		c.cache.remember(svc, s.p)
		c.cache.setFailed(types.NamespacedName{Namespace: "ns", Name: s.name}, s.failed)
	}
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "failed"}}}
	if diff := cmp.Diff(want, c.recovered(context.Background(), p1, cloud.Recovered)); diff != "" {
		t.Errorf("recovered (-want +got):\n%s", diff)
	}
	if got := c.recovered(context.Background(), p1, cloud.InstancesChanged); got != nil {
		t.Errorf("instances changed: %v, want nothing", got)
	}
}

// An adopted load balancer's backends are sent by the next pass even when the
// set looks unchanged (the condition does not record them), then only when
// the set changes.
func TestSwapNodesSendsAdoptedBackendsOnce(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	set := nodeSet{"n1": "fake://n1"}
	c := newServiceCache()
	c.remember(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}, nil)
	c.update(key, func(e *svcState) { e.nodes, e.phase = set, phaseEnsured })
	if _, send := c.swapNodes(key, "u1", set, ""); send {
		t.Error("an ensured load balancer with this set: sent again")
	}
	c.update(key, func(e *svcState) { e.unverified = true })
	if _, send := c.swapNodes(key, "u1", set, ""); !send {
		t.Error("an adopted load balancer: its backends not sent")
	}
	if _, send := c.swapNodes(key, "u1", set, ""); send {
		t.Error("an adopted load balancer: its backends sent twice")
	}
	if _, send := c.swapNodes(key, "u1", nodeSet{"n1": "fake://n1", "n2": "fake://n2"}, ""); !send {
		t.Error("a new node: not sent")
	}
}
