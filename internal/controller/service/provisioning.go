package service

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// provisioningFreshness is the shortest time between two listings of a
// provider for the Services whose load balancers are provisioning: however
// many are waiting, one listing answers all that were due when it was taken.
const provisioningFreshness = time.Second

// lbState is what a shared listing says of one Service's load balancer.
type lbState int

const (
	// lbUnknown: no listing (the provider cannot list, or the listing failed),
	// or the load balancer is not in it: only EnsureLoadBalancer can tell.
	lbUnknown lbState = iota
	// lbProvisioning: listed, without a status yet.
	lbProvisioning
	// lbActive: listed with its status.
	lbActive
	// lbWait: the last listing is older than the caller's due time, and too
	// young to list again: ask again after the returned delay.
	lbWait
)

func (s lbState) String() string {
	return [...]string{"unknown", "provisioning", "active", "wait"}[s]
}

// provisioningListings share a provider's ListLoadBalancers answer among the
// Services waiting for their load balancers to finish provisioning, instead
// of calling EnsureLoadBalancer again for each of them (which for a typical
// provider is at least one lookup per Service per retry).
type provisioningListings struct {
	freshness time.Duration
	clock     clock.PassiveClock
	mu        sync.Mutex
	byProv    map[*cloud.Provider]*sharedListing
}

type sharedListing struct {
	mu    sync.Mutex // held while listing: concurrent askers wait for the one call
	at    time.Time
	ok    bool
	byUID map[types.UID]stratus.LoadBalancerRef
}

func newProvisioningListings(freshness time.Duration, clk clock.PassiveClock) *provisioningListings {
	return &provisioningListings{freshness: freshness, clock: clk, byProv: map[*cloud.Provider]*sharedListing{}}
}

// state returns what a listing taken at or after due says of uid's load
// balancer, listing p when the last listing is older than due; but p is
// listed at most once per freshness: until then the answer is lbWait with the
// delay after which a new listing is possible.
func (l *provisioningListings) state(ctx context.Context, p *cloud.Provider, clusterName string, uid types.UID, due time.Time) (lbState, *v1.LoadBalancerStatus, time.Duration) {
	l.mu.Lock()
	sl := l.byProv[p]
	if sl == nil {
		sl = &sharedListing{}
		l.byProv[p] = sl
	}
	l.mu.Unlock()

	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.at.IsZero() || sl.at.Before(due) {
		if wait := l.freshness - l.clock.Since(sl.at); !sl.at.IsZero() && wait > 0 {
			return lbWait, nil, wait
		}
		refs, ok, err := p.ListLoadBalancers(cloud.WithPriority(ctx, cloud.PriorityLBWrite), clusterName)
		sl.at, sl.ok = l.clock.Now(), ok && err == nil
		sl.byUID = make(map[types.UID]stratus.LoadBalancerRef, len(refs))
		for _, r := range refs {
			sl.byUID[r.ServiceUID] = r
		}
	}
	if !sl.ok {
		return lbUnknown, nil, 0
	}
	ref, found := sl.byUID[uid]
	switch {
	case !found:
		return lbUnknown, nil, 0
	case ref.Provisioning:
		return lbProvisioning, nil, 0
	case ref.Status != nil:
		return lbActive, ref.Status.DeepCopy(), 0
	default: // a listing without statuses
		return lbUnknown, nil, 0
	}
}
