package nodelifecycle

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestNotReadySince(t *testing.T) {
	created := metav1.NewTime(t0.Add(-time.Hour))
	transition := metav1.NewTime(t0.Add(-time.Minute))
	node := func(conds ...v1.NodeCondition) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Status: v1.NodeStatus{Conditions: conds}}
	}
	for _, tc := range []struct {
		name       string
		node       *v1.Node
		wantStatus v1.ConditionStatus
		wantSince  time.Time
	}{
		{"ready", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, LastTransitionTime: transition}), v1.ConditionTrue, time.Time{}},
		{"false since transition", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, LastTransitionTime: transition}), v1.ConditionFalse, transition.Time},
		{"unknown since transition", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: "NodeStatusUnknown", LastTransitionTime: transition}), v1.ConditionUnknown, transition.Time},
		{"kubelet never posted: since creation", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown, Reason: reasonNeverUpdated, LastTransitionTime: transition}), v1.ConditionUnknown, created.Time},
		{"no transition time: since creation", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse}), v1.ConditionFalse, created.Time},
		{"missing condition: since creation", node(v1.NodeCondition{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue}), "", created.Time},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, since := notReadySince(tc.node)
			if status != tc.wantStatus || !since.Equal(tc.wantSince) {
				t.Errorf("notReadySince = %q, %v; want %q, %v", status, since, tc.wantStatus, tc.wantSince)
			}
		})
	}
}

// The NotReady clock of a node keeps running when its Ready condition goes from
// missing or False to Unknown, and restarts only after the node was Ready.
func TestNotReadyClocks(t *testing.T) {
	created := metav1.NewTime(t0.Add(-time.Hour))
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	ready := func(s v1.ConditionStatus, transition metav1.Time) []v1.NodeCondition {
		return []v1.NodeCondition{{Type: v1.NodeReady, Status: s, Reason: "r", LastTransitionTime: transition}}
	}
	type step struct {
		conds     []v1.NodeCondition
		wantReady bool
		wantSince time.Time
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"missing, then Unknown", []step{
			{nil, false, created.Time},
			{ready(v1.ConditionUnknown, at(-time.Minute)), false, created.Time},
			{ready(v1.ConditionUnknown, at(-time.Minute)), false, created.Time},
		}},
		{"False, then Unknown", []step{
			{ready(v1.ConditionFalse, at(-10*time.Minute)), false, t0.Add(-10 * time.Minute)},
			{ready(v1.ConditionUnknown, at(-time.Minute)), false, t0.Add(-10 * time.Minute)},
		}},
		{"Unknown first: its own time", []step{
			{ready(v1.ConditionUnknown, at(-time.Minute)), false, t0.Add(-time.Minute)},
		}},
		{"Ready in between restarts the clock", []step{
			{ready(v1.ConditionFalse, at(-10*time.Minute)), false, t0.Add(-10 * time.Minute)},
			{ready(v1.ConditionTrue, at(-5*time.Minute)), true, time.Time{}},
			{ready(v1.ConditionUnknown, at(-time.Minute)), false, t0.Add(-time.Minute)},
		}},
		{"False follows its own transitions", []step{
			{ready(v1.ConditionFalse, at(-10*time.Minute)), false, t0.Add(-10 * time.Minute)},
			{ready(v1.ConditionFalse, at(-time.Minute)), false, t0.Add(-time.Minute)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(Options{})
			for i, st := range tc.steps {
				n := &v1.Node{ObjectMeta: metav1.ObjectMeta{UID: "u1", CreationTimestamp: created}, Status: v1.NodeStatus{Conditions: st.conds}}
				readyNodes, notReady := s.readiness([]*v1.Node{n})
				gotReady := len(readyNodes) == 1
				var since time.Time
				if len(notReady) == 1 {
					since = notReady[0].since
				}
				if gotReady != st.wantReady || !since.Equal(st.wantSince) {
					t.Errorf("step %d: readiness = ready %v, since %v; want %v, %v", i, gotReady, since, st.wantReady, st.wantSince)
				}
			}
		})
	}
}

func TestCheckGuard(t *testing.T) {
	grace := time.Minute
	for _, tc := range []struct {
		name     string
		notReady time.Duration // how long NotReady at t0
		strikes  int
		want     BlockReason
	}{
		{"fresh NotReady, first strike", time.Second, 1, BlockedGracePeriod},
		{"fresh NotReady, confirmed", 30 * time.Second, 5, BlockedGracePeriod},
		{"exactly the grace period", time.Minute, 2, BlockedGracePeriod},
		{"past grace, first strike", 2 * time.Minute, 1, BlockedUnconfirmed},
		{"past grace, confirmed", 2 * time.Minute, 2, ""},
		{"long gone", 24 * time.Hour, 100, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkGuard(t0, t0.Add(-tc.notReady), grace, tc.strikes); got != tc.want {
				t.Errorf("checkGuard = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeletionBudget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		percent, min  int
		nodes         int
		wantLimit     int
		previous      []time.Duration // deletions this long before t0
		wantAllowedAt bool
	}{
		{"10% of 100", 10, 1, 100, 10, nil, true},
		{"10% of 5 is the minimum 1", 10, 1, 5, 1, nil, true},
		{"min 1 used", 10, 1, 5, 1, []time.Duration{time.Minute}, false},
		{"old deletion left the window", 10, 1, 5, 1, []time.Duration{10 * time.Minute}, true},
		{"10 of 100 used", 10, 1, 90, 9, repeat(time.Minute, 10), false},
		{"9 of 100 used, 91 left", 10, 1, 91, 9, repeat(time.Minute, 9), true},
		{"1 of 20 used, 19 left", 10, 1, 19, 1, repeat(time.Minute, 1), true},
		{"2 of 20 used, 18 left", 10, 1, 18, 1, repeat(time.Minute, 2), false},
		{"larger minimum", 10, 3, 10, 3, repeat(time.Minute, 2), true},
		{"100%", 100, 1, 4, 4, repeat(time.Minute, 3), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &deletionBudget{percent: tc.percent, min: tc.min, window: 10 * time.Minute}
			if got := b.limit(tc.nodes); got != tc.wantLimit {
				t.Errorf("limit(%d) = %d, want %d", tc.nodes, got, tc.wantLimit)
			}
			for i := len(tc.previous) - 1; i >= 0; i-- {
				b.record(t0.Add(-tc.previous[i]))
			}
			if got := b.allow(t0, tc.nodes); got != tc.wantAllowedAt {
				t.Errorf("allow = %v, want %v", got, tc.wantAllowedAt)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestOptions(t *testing.T) {
	got, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		MonitorPeriod: DefaultMonitorPeriod, DeletionGracePeriod: DefaultDeletionGracePeriod,
		DeletionBudgetPercent: DefaultDeletionBudgetPercent, DeletionBudgetMin: DefaultDeletionBudgetMin,
		DeletionBudgetWindow: DefaultDeletionBudgetWindow, Workers: DefaultWorkers,
		ConfirmationInterval: DefaultConfirmationInterval, Clock: clock.RealClock{},
	}
	if got != want {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	for _, bad := range []Options{
		{MonitorPeriod: -1}, {DeletionGracePeriod: -time.Second}, {DeletionBudgetWindow: -1}, {ConfirmationInterval: -1},
		{DeletionBudgetPercent: -1}, {DeletionBudgetPercent: 101}, {DeletionBudgetMin: -1}, {Workers: -2},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestStrikes(t *testing.T) {
	var s strikes
	s.observe(t0, 30*time.Second)
	s.observe(t0.Add(5*time.Second), 30*time.Second) // may be the same listing
	if s.count != 1 {
		t.Fatalf("count = %d after two answers 5s apart, want 1", s.count)
	}
	s.observe(t0.Add(31*time.Second), 30*time.Second)
	if s.count != 2 {
		t.Fatalf("count = %d after answers 31s apart, want 2", s.count)
	}
}
