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

// notReadySince reports whether the node is Ready and, when it is not, since when:
// the Ready condition's lastTransitionTime, or the node's creation when the
// condition is missing or has no transition time (a node that never became Ready).
func notReadySince(node *v1.Node) (ready bool, since time.Time) {
	for _, c := range node.Status.Conditions {
		if c.Type != v1.NodeReady {
			continue
		}
		if c.Status == v1.ConditionTrue {
			return true, time.Time{}
		}
		if !c.LastTransitionTime.IsZero() {
			return false, c.LastTransitionTime.Time
		}
		break
	}
	return false, node.CreationTimestamp.Time
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
	used := b.used(now)
	return used < b.limit(nodes+used)
}

// record counts a deletion made at now.
func (b *deletionBudget) record(now time.Time) {
	b.deletions = append(b.deletions, now)
}
