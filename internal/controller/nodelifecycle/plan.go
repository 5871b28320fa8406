package nodelifecycle

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A pass over one provider's nodes has three steps, kept apart so that the
// decisions can be tested on their own with any clock:
//
//  1. observe: the Nodes from the API server and, for the NotReady ones, what
//     the cloud says of their instances (checkInstances);
//  2. plan: a pure function of those observations, the time and the state the
//     controller keeps between passes (state.plan), returning actions;
//  3. apply: the actions carried out against the API server (controller.apply),
//     whose outcome (a node actually deleted) is fed back into the state.

// actionKind is what the controller does to one node.
type actionKind int

const (
	// actTaint adds the shutdown taint.
	actTaint actionKind = iota
	// actUntaint removes the shutdown taint.
	actUntaint
	// actBlock holds a deletion back: a metric always, an event when announce.
	actBlock
	// actDelete deletes the node.
	actDelete
	// actCheckFailed records that the node's instance could not be checked.
	actCheckFailed
)

// action is one step of a plan.
type action struct {
	kind actionKind
	node *v1.Node
	// reason, since, cause and announce describe an actBlock: why, since when
	// the node has been NotReady, the provider's error if any, and whether an
	// event announces it (the first time this reason holds the node back).
	reason   BlockReason
	since    time.Time
	cause    error
	announce bool
	// err is an actCheckFailed's error.
	err error
}

// check is what one pass learned about a NotReady node.
type check struct {
	node     *v1.Node
	since    time.Time // NotReady since
	exists   bool
	shutdown bool
	err      error
	blocked  BlockReason // set when the provider could not be asked at all
}

// nodeState is what the controller remembers of one node between passes.
type nodeState struct {
	// strikes counts the checks in a row that said "does not exist".
	strikes strikes
	// notReadySince is since when the node has been NotReady, as first seen
	// (notReadyClocks explains why it is remembered); zero while it is Ready.
	notReadySince time.Time
	// reported holds the block reasons announced by event since the node was
	// last Ready or seen to exist, so that a guard holding a node back for many
	// passes, for whichever reasons in turn, emits one event per reason.
	reported map[BlockReason]bool
}

// state is what the controller remembers between passes: per node UID, and the
// deletion budget of each provider. Only the pass goroutine touches it.
type state struct {
	nodes   map[types.UID]*nodeState
	budgets map[string]*deletionBudget
	opts    Options
}

func newState(opts Options) *state {
	return &state{nodes: map[types.UID]*nodeState{}, budgets: map[string]*deletionBudget{}, opts: opts}
}

// forget drops the state of nodes that are not in present any more.
func (s *state) forget(present map[types.UID]bool) {
	for uid := range s.nodes {
		if !present[uid] {
			delete(s.nodes, uid)
		}
	}
}

func (s *state) node(uid types.UID) *nodeState {
	ns, ok := s.nodes[uid]
	if !ok {
		ns = &nodeState{}
		s.nodes[uid] = ns
	}
	return ns
}

// readiness sorts a provider's nodes into Ready ones and NotReady ones (as
// checks to be filled in by the cloud), keeping each NotReady node's clock:
// the earlier of what the node says and what was remembered when its condition
// is Unknown (kube-controller-manager stamps Unknown with its own transition
// time although the node was NotReady before), otherwise what the node says.
// A Ready node's clock, strikes and announcements are forgotten, so its next
// NotReady spell starts afresh.
func (s *state) readiness(owned []*v1.Node) (ready []*v1.Node, notReady []check) {
	for _, n := range owned {
		status, since := notReadySince(n)
		if status == v1.ConditionTrue {
			delete(s.nodes, n.UID)
			ready = append(ready, n)
			continue
		}
		ns := s.node(n.UID)
		if status == v1.ConditionUnknown && !ns.notReadySince.IsZero() && ns.notReadySince.Before(since) {
			since = ns.notReadySince
		}
		ns.notReadySince = since
		notReady = append(notReady, check{node: n, since: since})
	}
	return ready, notReady
}

// budget returns the deletion budget of the provider named provider.
func (s *state) budget(provider string) *deletionBudget {
	b, ok := s.budgets[provider]
	if !ok {
		b = &deletionBudget{percent: s.opts.DeletionBudgetPercent, min: s.opts.DeletionBudgetMin, window: s.opts.DeletionBudgetWindow}
		s.budgets[provider] = b
	}
	return b
}

// plan decides, at now, what to do with one provider's nodes: the Ready ones
// lose the shutdown taint, the NotReady ones whose instance exists get it when
// the instance is shut down, and the NotReady ones whose instance does not
// exist are deleted once the guard lets them (grace period, confirmation,
// then the budget, which goes to the nodes NotReady the longest). owned is how
// many nodes the provider owns. It updates the strikes and announcements in s;
// deletions count towards the budget only once applied (deleted).
func (s *state) plan(now time.Time, provider string, owned int, ready []*v1.Node, notReady []check) []action {
	var out []action
	block := func(ch check, reason BlockReason, cause error) {
		ns := s.node(ch.node.UID)
		announce := !ns.reported[reason]
		if announce {
			if ns.reported == nil {
				ns.reported = map[BlockReason]bool{}
			}
			ns.reported[reason] = true
		}
		out = append(out, action{kind: actBlock, node: ch.node, reason: reason, since: ch.since, cause: cause, announce: announce})
	}
	for _, n := range ready {
		if hasTaint(n, shutdownTaint.Key) {
			out = append(out, action{kind: actUntaint, node: n})
		}
	}
	var candidates []check
	for _, ch := range notReady {
		n := ch.node
		switch {
		case ch.blocked != "":
			block(ch, ch.blocked, ch.err)
		case ch.err != nil:
			out = append(out, action{kind: actCheckFailed, node: n, err: ch.err})
		case ch.exists:
			ns := s.node(n.UID)
			ns.strikes, ns.reported = strikes{}, nil
			if ch.shutdown && !hasTaint(n, shutdownTaint.Key) {
				out = append(out, action{kind: actTaint, node: n})
			}
		default:
			ns := s.node(n.UID)
			ns.strikes.observe(now, s.opts.ConfirmationInterval)
			if reason := checkGuard(now, ch.since, s.opts.DeletionGracePeriod, ns.strikes.count); reason != "" {
				block(ch, reason, nil)
				continue
			}
			candidates = append(candidates, ch)
		}
	}
	slices.SortStableFunc(candidates, func(a, b check) int { return a.since.Compare(b.since) })
	budget := s.budget(provider)
	planned := 0
	for _, ch := range candidates {
		// The deletions planned in this pass count as if they were made, so
		// that one pass never plans more than the budget allows.
		if !budget.allowAfter(now, owned, planned) {
			block(ch, BlockedBudget, nil)
			continue
		}
		planned++
		out = append(out, action{kind: actDelete, node: ch.node})
	}
	return out
}

// deleted records that the node uid was deleted at now (an actDelete applied):
// it counts towards the provider's budget and its state is dropped.
func (s *state) deleted(now time.Time, provider string, uid types.UID) {
	s.budget(provider).record(now)
	delete(s.nodes, uid)
}
