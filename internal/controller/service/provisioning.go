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

// absentListingAge is how old a listing may be for its lack of a load
// balancer to mark an Ensure absent. A listing older than a create this
// process made since costs that create's Service one refused create (the
// name is taken) before the usual lookup: no harm, one call.
const absentListingAge = 10 * time.Second

// shared is p's shared listing.
func (l *provisioningListings) shared(p *cloud.Provider) *sharedListing {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.byProv[p]
	if sl == nil {
		sl = &sharedListing{}
		l.byProv[p] = sl
	}
	return sl
}

// refresh lists p's load balancers into sl, whose lock the caller holds.
func (l *provisioningListings) refresh(ctx context.Context, sl *sharedListing, p *cloud.Provider, clusterName string) {
	refs, ok, err := p.ListLoadBalancers(cloud.WithPriority(ctx, cloud.PriorityLBWrite), clusterName)
	sl.at, sl.ok = l.clock.Now(), ok && err == nil
	sl.byUID = make(map[types.UID]stratus.LoadBalancerRef, len(refs))
	for _, r := range refs {
		sl.byUID[r.ServiceUID] = r
	}
}

// absent reports whether a listing of p taken at most maxAge ago lacks
// uid's load balancer, listing p when no listing is that recent (at most
// once per freshness; within it, false). It is the hint behind
// stratus.WithLoadBalancerAbsent for a Service that has our finalizer but
// whose load balancer a listing has not seen, a new leader's typical
// backlog after failovers: its provider may create without a lookup, and
// takes the usual path when the create finds the name taken. Any doubt (no
// listing, a failed one, a provider that does not list) is false.
func (l *provisioningListings) absent(ctx context.Context, p *cloud.Provider, clusterName string, uid types.UID, maxAge time.Duration) bool {
	sl := l.shared(p)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.at.IsZero() || l.clock.Since(sl.at) > maxAge {
		if !sl.at.IsZero() && l.clock.Since(sl.at) < l.freshness {
			return false
		}
		l.refresh(ctx, sl, p, clusterName)
	}
	_, found := sl.byUID[uid]
	return sl.ok && !found
}

// listed reports whether a listing of p taken at most maxAge ago has uid's
// load balancer. It never lists: it serves a cleanup, which then needs no
// lookup to know that the load balancer exists, when a listing for another
// purpose is recent (a burst of deletions and creations). A load balancer
// deleted since is harmless: its deletion finds it gone.
func (l *provisioningListings) listed(p *cloud.Provider, uid types.UID, maxAge time.Duration) bool {
	sl := l.shared(p)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.ok || sl.at.IsZero() || l.clock.Since(sl.at) > maxAge {
		return false
	}
	_, found := sl.byUID[uid]
	return found
}

// state returns what a listing taken at or after due says of uid's load
// balancer, listing p when the last listing is older than due; but p is
// listed at most once per freshness: until then the answer is lbWait with the
// delay after which a new listing is possible.
func (l *provisioningListings) state(ctx context.Context, p *cloud.Provider, clusterName string, uid types.UID, due time.Time) (lbState, *v1.LoadBalancerStatus, time.Duration) {
	sl := l.shared(p)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.at.IsZero() || sl.at.Before(due) {
		if wait := l.freshness - l.clock.Since(sl.at); !sl.at.IsZero() && wait > 0 {
			return lbWait, nil, wait
		}
		l.refresh(ctx, sl, p, clusterName)
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
