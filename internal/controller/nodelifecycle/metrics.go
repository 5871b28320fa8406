package nodelifecycle

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Decisions of a pass about one node, the decision label of
// stratus_node_lifecycle_decisions_total.
const (
	decisionDeleted         = "deleted"
	decisionDeleteFailed    = "delete_failed"
	decisionShutdownTainted = "shutdown_tainted"
	decisionShutdownCleared = "shutdown_untainted"
	decisionCheckFailed     = "check_failed"
)

var (
	deletionBlocked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_node_deletion_blocked_total",
		Help: "Node deletions held back by the deletion guard, by provider and reason (ListingFailed, EmptyListing, GracePeriod, Unconfirmed, BudgetExhausted); counted once per node and pass.",
	}, []string{"provider", "reason"})
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_node_lifecycle_decisions_total",
		Help: "Actions of the cloud node lifecycle controller, by provider and decision (deleted, delete_failed, shutdown_tainted, shutdown_untainted, check_failed).",
	}, []string{"provider", "decision"})
)

func init() {
	metrics.Registry.MustRegister(deletionBlocked, decisions)
}

// initMetrics creates provider's series at 0, so that a rate over them is 0
// (not absent) until the first hold or decision.
func initMetrics(provider string) {
	for _, r := range []BlockReason{BlockedListingFailed, BlockedEmptyListing, BlockedGracePeriod, BlockedUnconfirmed, BlockedBudget} {
		deletionBlocked.WithLabelValues(provider, string(r))
	}
	for _, d := range []string{decisionDeleted, decisionDeleteFailed, decisionShutdownTainted, decisionShutdownCleared, decisionCheckFailed} {
		decisions.WithLabelValues(provider, d)
	}
}
