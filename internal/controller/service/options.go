package service

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// Defaults of Options.
const (
	DefaultWorkers           = 10
	DefaultNodeUpdateWindow  = time.Second
	DefaultNodeInitWait      = 30 * time.Second
	DefaultResyncPeriod      = 10 * time.Minute
	DefaultOrphanGracePeriod = 5 * time.Minute
	DefaultRetryBaseDelay    = 5 * time.Second
	DefaultRetryMaxDelay     = 60 * time.Second
)

// Options configures the service controller. Zero values take the defaults.
type Options struct {
	// Workers is --concurrent-service-syncs (default 10; upstream's 1 serializes
	// hundreds of Services behind slow clouds). It bounds both Services reconciled
	// in parallel and parallel UpdateLoadBalancer calls of one backend update pass.
	// Negative values are rejected.
	Workers int
	// ClusterName is --cluster-name (default "kubernetes"), passed to every
	// LoadBalancer call.
	ClusterName string
	// NodeUpdateWindow gathers node changes before the load balancers' backends are
	// updated (default 1s; no upstream flag): a pass waits until the changes
	// have paused for a window, at most ten windows. Each load balancer gets
	// at most one UpdateLoadBalancer per pass.
	NodeUpdateWindow time.Duration
	// NodeInitWait is how long a joining node that the node controller has not
	// initialized yet (uninitialized taint, no provider ID), and whose machine
	// the cached instance listing does not show, is kept out of the
	// backends, unless no other backend exists (default 30s; no upstream
	// flag). Its initialization triggers the backend update, which then names
	// it by provider ID instead of making the provider look the node up by name
	// for every load balancer. Upstream includes such nodes at once.
	NodeInitWait time.Duration
	// ResyncPeriod is --load-balancer-resync-period (default 10m): how often every
	// load balancer is checked for drift, and the providers' load balancer listings
	// are scanned for orphans.
	ResyncPeriod time.Duration
	// OrphanGracePeriod is how long a listed load balancer must stay without its
	// Service before it is deleted (default 5m; no upstream flag).
	OrphanGracePeriod time.Duration
	// RetryBaseDelay and RetryMaxDelay bound the per-Service exponential backoff
	// after errors other than RetryError (default 5s and 60s; upstream's are 5s
	// and 300s, without a flag). When the provider recovers from an outage,
	// the Services whose last sync failed are synced at once instead.
	RetryBaseDelay, RetryMaxDelay time.Duration
	// Clock is the time the controller decides and schedules by (default the
	// real clock): the node-update window, the wait for joining nodes, the
	// provisioning due times, the drift and orphan period and the orphan grace
	// period. Tests set a fake one. The per-Service backoff after errors is the
	// work queue's and runs on the real clock.
	Clock clock.WithTicker
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	checks := []struct {
		name     string
		negative bool
	}{
		{"Workers (--concurrent-service-syncs)", o.Workers < 0},
		{"NodeUpdateWindow", o.NodeUpdateWindow < 0},
		{"NodeInitWait", o.NodeInitWait < 0},
		{"ResyncPeriod (--load-balancer-resync-period)", o.ResyncPeriod < 0},
		{"OrphanGracePeriod", o.OrphanGracePeriod < 0},
		{"RetryBaseDelay", o.RetryBaseDelay < 0},
		{"RetryMaxDelay", o.RetryMaxDelay < 0},
	}
	for _, c := range checks {
		if c.negative {
			return o, fmt.Errorf("service controller: %s must not be negative", c.name)
		}
	}
	setDefault(&o.Workers, DefaultWorkers)
	setDefault(&o.ClusterName, cloud.DefaultClusterName)
	setDefault(&o.NodeUpdateWindow, DefaultNodeUpdateWindow)
	setDefault(&o.NodeInitWait, DefaultNodeInitWait)
	setDefault(&o.ResyncPeriod, DefaultResyncPeriod)
	setDefault(&o.OrphanGracePeriod, DefaultOrphanGracePeriod)
	setDefault(&o.RetryBaseDelay, DefaultRetryBaseDelay)
	setDefault(&o.RetryMaxDelay, DefaultRetryMaxDelay)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.RetryMaxDelay < o.RetryBaseDelay {
		return o, fmt.Errorf("service controller: RetryMaxDelay %v is below RetryBaseDelay %v", o.RetryMaxDelay, o.RetryBaseDelay)
	}
	return o, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
