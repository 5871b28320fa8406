package nodelifecycle

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The plan's timing behaviour, pass by pass on a made-up clock: what each pass
// decides for nodes whose Ready condition and cloud answers the table gives.

// planNode is one node of a pass: its Ready status and NotReady transition (as
// an offset from t0), and what the cloud says of its instance.
type planNode struct {
	name     string
	ready    v1.ConditionStatus
	since    time.Duration // Ready condition's lastTransitionTime, from t0
	exists   bool
	shutdown bool
	tainted  bool
	err      error
	blocked  BlockReason
}

// planPass is one pass at t0+at, and the actions it must plan, each written
// "kind node[ reason][ !]" ("!" when the block is announced by event).
type planPass struct {
	at    time.Duration
	nodes []planNode
	want  []string
	// deleted says which planned deletions were applied (default: all).
	failDelete bool
}

func (p planNode) node() *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.name, UID: types.UID("uid-" + p.name), CreationTimestamp: metav1.NewTime(t0.Add(-24 * time.Hour))}}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: p.ready, LastTransitionTime: metav1.NewTime(t0.Add(p.since))}}
	if p.tainted {
		n.Spec.Taints = []v1.Taint{shutdownTaint}
	}
	return n
}

func describe(a action) string {
	kind := map[actionKind]string{actTaint: "taint", actUntaint: "untaint", actBlock: "block", actDelete: "delete", actCheckFailed: "checkFailed"}[a.kind]
	s := kind + " " + a.node.Name
	if a.kind == actBlock {
		s += " " + string(a.reason)
		if a.announce {
			s += " !"
		}
	}
	return s
}

// runPasses plans each pass in turn on one state, as the controller does, and
// compares the actions.
func runPasses(t *testing.T, opts Options, passes []planPass) {
	t.Helper()
	opts, err := opts.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s := newState(opts)
	for i, p := range passes {
		var owned []*v1.Node
		answers := map[string]planNode{}
		for _, pn := range p.nodes {
			owned = append(owned, pn.node())
			answers[pn.name] = pn
		}
		ready, notReady := s.readiness(owned)
		for j := range notReady {
			a := answers[notReady[j].node.Name]
			notReady[j].exists, notReady[j].shutdown, notReady[j].err, notReady[j].blocked = a.exists, a.shutdown, a.err, a.blocked
		}
		now := t0.Add(p.at)
		plan := s.plan(now, "p", len(owned), ready, notReady)
		var got []string
		for _, a := range plan {
			got = append(got, describe(a))
			if a.kind == actDelete && !p.failDelete {
				s.deleted(now, "p", a.node.UID)
			}
		}
		if !slices.Equal(got, p.want) {
			t.Errorf("pass %d at t0+%s: plan\n  %s\nwant\n  %s", i, p.at, strings.Join(got, "\n  "), strings.Join(p.want, "\n  "))
		}
	}
}

func TestPlan(t *testing.T) {
	minute := time.Minute
	grace := Options{DeletionGracePeriod: minute, ConfirmationInterval: 30 * time.Second, DeletionBudgetPercent: 100}
	gone := func(name string, since time.Duration) planNode {
		return planNode{name: name, ready: v1.ConditionFalse, since: since}
	}
	for _, tc := range []struct {
		name   string
		opts   Options
		passes []planPass
	}{
		{"a gone node waits out the grace period, then is deleted on the second answer", grace, []planPass{
			{at: 0, nodes: []planNode{gone("a", 0)}, want: []string{"block a GracePeriod !"}},
			{at: 10 * time.Second, nodes: []planNode{gone("a", 0)}, want: []string{"block a GracePeriod"}},
			{at: 61 * time.Second, nodes: []planNode{gone("a", 0)}, want: []string{"delete a"}},
		}},
		{"answers closer than the confirmation interval count once", grace, []planPass{
			{at: 2 * minute, nodes: []planNode{gone("a", 0)}, want: []string{"block a Unconfirmed !"}},
			{at: 2*minute + 29*time.Second, nodes: []planNode{gone("a", 0)}, want: []string{"block a Unconfirmed"}},
			{at: 2*minute + 30*time.Second, nodes: []planNode{gone("a", 0)}, want: []string{"delete a"}},
		}},
		{"an instance seen again resets the confirmation and the announcements", grace, []planPass{
			{at: 2 * minute, nodes: []planNode{gone("a", 0)}, want: []string{"block a Unconfirmed !"}},
			{at: 3 * minute, nodes: []planNode{{name: "a", ready: v1.ConditionFalse, exists: true}}, want: nil},
			{at: 4 * minute, nodes: []planNode{gone("a", 0)}, want: []string{"block a Unconfirmed !"}},
			{at: 5 * minute, nodes: []planNode{gone("a", 0)}, want: []string{"delete a"}},
		}},
		{"Ready in between restarts the grace period", grace, []planPass{
			{at: 0, nodes: []planNode{gone("a", 0)}, want: []string{"block a GracePeriod !"}},
			{at: 30 * time.Second, nodes: []planNode{{name: "a", ready: v1.ConditionTrue}}, want: nil},
			{at: 80 * time.Second, nodes: []planNode{gone("a", 70*time.Second)}, want: []string{"block a GracePeriod !"}},
			{at: 140 * time.Second, nodes: []planNode{gone("a", 70*time.Second)}, want: []string{"delete a"}},
		}},
		{"Unknown stamped later does not restart the clock", grace, []planPass{
			{at: 0, nodes: []planNode{gone("a", 0)}, want: []string{"block a GracePeriod !"}},
			{at: 61 * time.Second, nodes: []planNode{{name: "a", ready: v1.ConditionUnknown, since: time.Hour}}, want: []string{"delete a"}},
		}},
		{"a failed or empty listing blocks, once per reason, and deletes nothing", grace, []planPass{
			{at: 2 * minute, nodes: []planNode{{name: "a", ready: v1.ConditionFalse, blocked: BlockedListingFailed, err: errors.New("503")}}, want: []string{"block a ListingFailed !"}},
			{at: 3 * minute, nodes: []planNode{{name: "a", ready: v1.ConditionFalse, blocked: BlockedEmptyListing}}, want: []string{"block a EmptyListing !"}},
			{at: 4 * minute, nodes: []planNode{{name: "a", ready: v1.ConditionFalse, blocked: BlockedListingFailed}}, want: []string{"block a ListingFailed"}},
		}},
		{"a check error is never an absence", grace, []planPass{
			{at: 2 * minute, nodes: []planNode{{name: "a", ready: v1.ConditionFalse, err: errors.New("timeout")}}, want: []string{"checkFailed a"}},
			{at: 3 * minute, nodes: []planNode{{name: "a", ready: v1.ConditionFalse, err: errors.New("timeout")}}, want: []string{"checkFailed a"}},
			{at: 4 * minute, nodes: []planNode{gone("a", 0)}, want: []string{"block a Unconfirmed !"}},
		}},
		{"shutdown taint added to a NotReady shut-down node, removed when Ready", grace, []planPass{
			{at: 0, nodes: []planNode{{name: "a", ready: v1.ConditionFalse, exists: true, shutdown: true}}, want: []string{"taint a"}},
			{at: time.Second, nodes: []planNode{{name: "a", ready: v1.ConditionFalse, exists: true, shutdown: true, tainted: true}}, want: nil},
			{at: 2 * time.Second, nodes: []planNode{{name: "a", ready: v1.ConditionTrue, tainted: true}}, want: []string{"untaint a"}},
		}},
		{"the budget goes to the nodes NotReady the longest, one window at a time",
			Options{DeletionGracePeriod: minute, ConfirmationInterval: 30 * time.Second, DeletionBudgetPercent: 10, DeletionBudgetMin: 1, DeletionBudgetWindow: 10 * minute},
			[]planPass{
				{at: 2 * minute, nodes: []planNode{gone("new", -minute), gone("old", -time.Hour)}, want: []string{"block new Unconfirmed !", "block old Unconfirmed !"}},
				{at: 3 * minute, nodes: []planNode{gone("new", -minute), gone("old", -time.Hour)}, want: []string{"delete old", "block new BudgetExhausted !"}},
				{at: 4 * minute, nodes: []planNode{gone("new", -minute)}, want: []string{"block new BudgetExhausted"}},
				{at: 13 * minute, nodes: []planNode{gone("new", -minute)}, want: []string{"delete new"}},
			}},
		{"a deletion that failed does not use the budget",
			Options{DeletionGracePeriod: minute, ConfirmationInterval: 30 * time.Second, DeletionBudgetPercent: 10, DeletionBudgetMin: 1, DeletionBudgetWindow: 10 * minute},
			[]planPass{
				{at: 2 * minute, nodes: []planNode{gone("a", 0)}, want: []string{"block a Unconfirmed !"}},
				{at: 3 * minute, nodes: []planNode{gone("a", 0)}, want: []string{"delete a"}, failDelete: true},
				{at: 4 * minute, nodes: []planNode{gone("a", 0)}, want: []string{"delete a"}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { runPasses(t, tc.opts, tc.passes) })
	}
}

// One pass never plans more deletions than the budget allows, however many
// nodes are confirmed gone at once.
func TestPlanBudgetWithinOnePass(t *testing.T) {
	opts := Options{DeletionGracePeriod: time.Minute, ConfirmationInterval: 30 * time.Second, DeletionBudgetPercent: 10, DeletionBudgetMin: 1, DeletionBudgetWindow: 10 * time.Minute}
	var nodes []planNode
	for i := range 30 {
		nodes = append(nodes, planNode{name: fmt.Sprintf("n%02d", i), ready: v1.ConditionFalse, since: -time.Duration(30-i) * time.Hour})
	}
	var second []string
	for i := range 30 {
		if i < 3 { // 10% of 30, the longest NotReady first
			second = append(second, fmt.Sprintf("delete n%02d", i))
		} else {
			second = append(second, fmt.Sprintf("block n%02d BudgetExhausted !", i))
		}
	}
	slices.SortStableFunc(second, func(a, b string) int {
		return strings.Compare(a[strings.IndexByte(a, ' ')+1:], b[strings.IndexByte(b, ' ')+1:])
	})
	var first []string
	for i := range 30 {
		first = append(first, fmt.Sprintf("block n%02d Unconfirmed !", i))
	}
	runPasses(t, opts, []planPass{{at: 0, nodes: nodes, want: first}, {at: time.Minute, nodes: nodes, want: second}})
}
