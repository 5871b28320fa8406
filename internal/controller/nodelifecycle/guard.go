package nodelifecycle

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// BlockReason says why the deletion guard held back the deletion of a node whose
// instance the provider reported missing (or could not be asked about). It is the
// reason label of stratus_node_deletion_blocked_total.
type BlockReason string

// The reasons, in the order the guard checks them.
const (
	// BlockedListingFailed: the provider's instance listing failed.
	BlockedListingFailed BlockReason = "ListingFailed"
	// BlockedEmptyListing: the listing was empty while the provider owns nodes, the
	// signature of a cloud API outage or a credentials problem.
	BlockedEmptyListing BlockReason = "EmptyListing"
	// BlockedGracePeriod: the node has not been NotReady for DeletionGracePeriod.
	BlockedGracePeriod BlockReason = "GracePeriod"
	// BlockedUnconfirmed: only one check in a row said "does not exist".
	BlockedUnconfirmed BlockReason = "Unconfirmed"
	// BlockedBudget: the provider's deletion budget for the window is used up.
	BlockedBudget BlockReason = "BudgetExhausted"
)

// confirmations is how many checks in a row must say "does not exist".
const confirmations = 2

// strikes counts the checks in a row that said a node's instance does not exist.
type strikes struct {
	count int
	last  time.Time // when the last counted answer came
}

// observe counts a "does not exist" answer at now, unless the last counted one is
// less than interval old: answers that close may come from the same cached listing.
func (s *strikes) observe(now time.Time, interval time.Duration) {
	if s.count == 0 || now.Sub(s.last) >= interval {
		s.count++
		s.last = now
	}
}

// reasonNeverUpdated is the reason of the Ready=Unknown condition that
// kube-controller-manager writes on a node whose kubelet never posted a status.
const reasonNeverUpdated = "NodeStatusNeverUpdated"

// notReadySince reports the node's Ready status ("" when the condition is
// missing) and, when it is not True, since when the node says it is NotReady: the
// Ready condition's lastTransitionTime, or the node's creation when the condition
// is missing, has no transition time, or says the kubelet never posted a status
// (a node that never became Ready was NotReady from the start).
func notReadySince(node *v1.Node) (status v1.ConditionStatus, since time.Time) {
	for _, c := range node.Status.Conditions {
		if c.Type != v1.NodeReady {
			continue
		}
		switch {
		case c.Status == v1.ConditionTrue:
			return c.Status, time.Time{}
		case c.LastTransitionTime.IsZero(), c.Status == v1.ConditionUnknown && c.Reason == reasonNeverUpdated:
			return c.Status, node.CreationTimestamp.Time
		}
		return c.Status, c.LastTransitionTime.Time
	}
	return "", node.CreationTimestamp.Time
}

// checkGuard applies the per-node conditions of the deletion guard to a NotReady
// node that the latest check reported missing: NotReady for longer than grace,
// and missing on at least two checks in a row (strikes). It returns "" when they
// hold; the budget is checked separately, across the provider's candidates.
func checkGuard(now, notReadySince time.Time, grace time.Duration, strikes int) BlockReason {
	if now.Sub(notReadySince) <= grace {
		return BlockedGracePeriod
	}
	if strikes < confirmations {
		return BlockedUnconfirmed
	}
	return ""
}

// deletionBudget limits the deletions of one provider's nodes per sliding window.
type deletionBudget struct {
	percent, min int
	window       time.Duration
	deletions    []time.Time // within the window, oldest first
}

// limit is how many deletions the window allows for a provider owning nodes.
func (b *deletionBudget) limit(nodes int) int {
	return max(b.min, nodes*b.percent/100)
}

// used returns the deletions within the window ending at now, forgetting older ones.
func (b *deletionBudget) used(now time.Time) int {
	i := 0
	for i < len(b.deletions) && now.Sub(b.deletions[i]) >= b.window {
		i++
	}
	b.deletions = b.deletions[i:]
	return len(b.deletions)
}

// allow reports whether one more deletion fits the window ending at now for a
// provider owning nodes. The nodes deleted within the window still count towards
// the base, so that each deletion does not shrink the budget for the next.
func (b *deletionBudget) allow(now time.Time, nodes int) bool {
	return b.allowAfter(now, nodes, 0)
}

// allowAfter is allow when planned more deletions, not yet made, are counted as
// if they were: they still count among the provider's nodes.
func (b *deletionBudget) allowAfter(now time.Time, nodes, planned int) bool {
	used := b.used(now)
	return used+planned < b.limit(nodes+used)
}

// record counts a deletion made at now.
func (b *deletionBudget) record(now time.Time) {
	b.deletions = append(b.deletions, now)
}
