package nodelifecycle

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// Defaults of the Options fields.
const (
	// DefaultMonitorPeriod is upstream's --node-monitor-period.
	DefaultMonitorPeriod = 5 * time.Second
	// DefaultDeletionGracePeriod is --node-deletion-grace-period's default.
	DefaultDeletionGracePeriod = time.Minute
	// DefaultDeletionBudgetPercent, DefaultDeletionBudgetMin and
	// DefaultDeletionBudgetWindow: at most 10% of a provider's nodes, and at least
	// one, deleted per 10 minutes.
	DefaultDeletionBudgetPercent = 10
	DefaultDeletionBudgetMin     = 1
	DefaultDeletionBudgetWindow  = 10 * time.Minute
	// DefaultConfirmationInterval is the cloud layer's default instance-cache
	// freshness, so that the two "does not exist" answers come from two listings.
	DefaultConfirmationInterval = cloud.DefaultInstanceCacheFreshness
	// DefaultWorkers is the parallelism of per-node checks for providers that
	// cannot list their instances.
	DefaultWorkers = 10
)

// Options configures the cloud node lifecycle controller. Zero values take the
// defaults; negative values are rejected.
type Options struct {
	// MonitorPeriod is --node-monitor-period (default 5s): the pause between the end
	// of one pass over the nodes and the start of the next.
	MonitorPeriod time.Duration
	// DeletionGracePeriod is --node-deletion-grace-period (default 1m; no upstream
	// equivalent): how long a node must have been NotReady, measured from its Ready
	// condition's lastTransitionTime (or its creation when it has none), before it
	// may be deleted.
	DeletionGracePeriod time.Duration
	// ConfirmationInterval is the least time between the two "does not exist"
	// answers that confirm a deletion (default 30s, the cloud layer's default
	// instance-cache freshness; no upstream flag). The manager sets it to the
	// provider's configured cache freshness, so that the second answer never comes
	// from the same cached listing as the first.
	ConfirmationInterval time.Duration
	// DeletionBudgetPercent is the share of a provider's nodes that may be deleted
	// within DeletionBudgetWindow (default 10, at most 100; no upstream flag).
	DeletionBudgetPercent int
	// DeletionBudgetMin is the number of deletions per window allowed however few
	// nodes the provider has (default 1; no upstream flag).
	DeletionBudgetMin int
	// DeletionBudgetWindow is the sliding window of the deletion budget (default
	// 10m; no upstream flag).
	DeletionBudgetWindow time.Duration
	// Workers is how many NotReady nodes are checked in parallel when the provider
	// cannot list its instances (default 10; upstream's NodeMonitorWorkers). Each
	// check goes through the provider's request budget.
	Workers int
	// Clock is the time the passes are scheduled and decided by (default the
	// real clock); tests set a fake one.
	Clock clock.WithTicker
}

// withDefaults validates o and returns it with zero values replaced by defaults.
func (o Options) withDefaults() (Options, error) {
	for _, d := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{
		{"--node-monitor-period", &o.MonitorPeriod, DefaultMonitorPeriod},
		{"--node-deletion-grace-period", &o.DeletionGracePeriod, DefaultDeletionGracePeriod},
		{"node lifecycle DeletionBudgetWindow", &o.DeletionBudgetWindow, DefaultDeletionBudgetWindow},
		{"node lifecycle ConfirmationInterval", &o.ConfirmationInterval, DefaultConfirmationInterval},
	} {
		if *d.value < 0 {
			return o, fmt.Errorf("%s must not be negative, got %s", d.name, *d.value)
		}
		if *d.value == 0 {
			*d.value = d.def
		}
	}
	for _, n := range []struct {
		name     string
		value    *int
		def, max int
	}{
		{"node lifecycle DeletionBudgetPercent", &o.DeletionBudgetPercent, DefaultDeletionBudgetPercent, 100},
		{"node lifecycle DeletionBudgetMin", &o.DeletionBudgetMin, DefaultDeletionBudgetMin, 0},
		{"node lifecycle Workers", &o.Workers, DefaultWorkers, 0},
	} {
		if *n.value < 0 {
			return o, fmt.Errorf("%s must not be negative, got %d", n.name, *n.value)
		}
		if n.max > 0 && *n.value > n.max {
			return o, fmt.Errorf("%s must be at most %d, got %d", n.name, n.max, *n.value)
		}
		if *n.value == 0 {
			*n.value = n.def
		}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, nil
}
