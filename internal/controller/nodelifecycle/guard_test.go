package nodelifecycle

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestNotReadySince(t *testing.T) {
	created := metav1.NewTime(t0.Add(-time.Hour))
	transition := metav1.NewTime(t0.Add(-time.Minute))
	node := func(conds ...v1.NodeCondition) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Status: v1.NodeStatus{Conditions: conds}}
	}
	for _, tc := range []struct {
		name      string
		node      *v1.Node
		wantReady bool
		wantSince time.Time
	}{
		{"ready", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, LastTransitionTime: transition}), true, time.Time{}},
		{"false since transition", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, LastTransitionTime: transition}), false, transition.Time},
		{"unknown since transition", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown, LastTransitionTime: transition}), false, transition.Time},
		{"no transition time: since creation", node(v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse}), false, created.Time},
		{"missing condition: since creation", node(v1.NodeCondition{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue}), false, created.Time},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready, since := notReadySince(tc.node)
			if ready != tc.wantReady || !since.Equal(tc.wantSince) {
				t.Errorf("notReadySince = %v, %v; want %v, %v", ready, since, tc.wantReady, tc.wantSince)
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
		ConfirmationInterval: DefaultConfirmationInterval,
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
