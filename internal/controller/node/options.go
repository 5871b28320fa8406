package node

import (
	"fmt"
	"time"
)

// Defaults of the Options fields.
const (
	// DefaultWorkers differs from upstream's 1: a burst of hundreds of joining nodes
	// would otherwise be initialized one at a time. Each initialization is one cloud
	// call (served from a listing when the provider can list) and two API writes,
	// so 20 workers keep both the cloud budget and the API client busy without
	// flooding either.
	DefaultWorkers = 20
	// DefaultStatusUpdateFrequency is upstream's --node-status-update-frequency.
	DefaultStatusUpdateFrequency = 5 * time.Minute
	// DefaultRetryBaseDelay and DefaultRetryMaxDelay bound the per-Node backoff
	// after a failed sync. A failed initialization is usually a lasting fault
	// (an instance the cloud does not have, a provided IP it does not know), so
	// the first retry waits seconds, not the work queue's 5 ms: a permanent
	// error costs six attempts (and InitializationFailed events) in the first
	// minute and then one every five minutes.
	DefaultRetryBaseDelay = 2 * time.Second
	DefaultRetryMaxDelay  = 5 * time.Minute
)

// Options configures the cloud node controller. Zero values take the defaults.
type Options struct {
	// Workers is --concurrent-node-syncs (default 20, upstream 1): how many Nodes
	// are initialized or label-repaired in parallel. Values below 0 are rejected;
	// an explicit 0 from the flag must be rejected by the caller, since 0 here
	// means "default".
	Workers int
	// StatusUpdateWorkers is --concurrent-node-status-updates (default 0 = Workers):
	// the parallelism of the periodic address refresh for providers that cannot
	// list their instances (one cloud call per node).
	StatusUpdateWorkers int
	// StatusUpdateFrequency is --node-status-update-frequency (default 5m): how often
	// the addresses of initialized Nodes are refreshed from the cloud.
	StatusUpdateFrequency time.Duration
	// RetryBaseDelay and RetryMaxDelay bound the per-Node exponential backoff
	// after a failed sync: the first retry waits RetryBaseDelay, each further
	// failure doubles the wait, up to RetryMaxDelay (default 2s and 5m; no
	// flag). A change of the Node's taints, labels, provider ID or
	// provided-node-ip annotation is synced at once regardless.
	RetryBaseDelay, RetryMaxDelay time.Duration
}

// withDefaults validates o and returns it with zero values replaced by defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Workers < 0:
		return o, fmt.Errorf("--concurrent-node-syncs must be at least 1, got %d", o.Workers)
	case o.StatusUpdateWorkers < 0:
		return o, fmt.Errorf("--concurrent-node-status-updates must not be negative, got %d", o.StatusUpdateWorkers)
	case o.StatusUpdateFrequency < 0:
		return o, fmt.Errorf("--node-status-update-frequency must not be negative, got %s", o.StatusUpdateFrequency)
	case o.RetryBaseDelay < 0:
		return o, fmt.Errorf("RetryBaseDelay must not be negative, got %s", o.RetryBaseDelay)
	case o.RetryMaxDelay < 0:
		return o, fmt.Errorf("RetryMaxDelay must not be negative, got %s", o.RetryMaxDelay)
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.StatusUpdateWorkers == 0 {
		o.StatusUpdateWorkers = o.Workers
	}
	if o.StatusUpdateFrequency == 0 {
		o.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if o.RetryBaseDelay == 0 {
		o.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if o.RetryMaxDelay == 0 {
		o.RetryMaxDelay = DefaultRetryMaxDelay
	}
	if o.RetryMaxDelay < o.RetryBaseDelay {
		return o, fmt.Errorf("RetryMaxDelay %s is below RetryBaseDelay %s", o.RetryMaxDelay, o.RetryBaseDelay)
	}
	return o, nil
}
