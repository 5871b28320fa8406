package cloud

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	"github.com/stratus-ccm/stratus/pkg/stratus/instanceindex"
)

// creationSlack allows for the second granularity of creation timestamps and for
// clock skew between the API server and the manager when deciding whether a listing
// was taken after a node was created.
const creationSlack = 2 * time.Second

// instanceCache answers instance questions from the provider's InstanceLister.
//
// A listing answers questions for its freshness window. Concurrent listings of one
// priority class are coalesced into one cloud call. A listing that lacks a node's
// instance is trusted only if it started after the node object was created
// (machines are older than their nodes) or after the question was asked;
// otherwise, for a node that joined after the listing, the cache lists again once
// before answering "not found". An empty listing answers nothing
// (ErrEmptyListing), and a failed one is an error, never "gone".
type instanceCache struct {
	p         *Provider
	freshness time.Duration
	group     singleflight.Group

	mu   sync.Mutex
	snap *snapshot
}

// snapshot is one successful listing.
type snapshot struct {
	*instanceindex.Index
	startedAt time.Time
	list      []stratus.Instance
	// fingerprint is fingerprintInstances(list), to tell whether the next
	// listing changed anything.
	fingerprint string
	// invalidated is set when the provider's watch reported a change after
	// this listing: it answers no question that needs a fresh listing.
	invalidated atomic.Bool
}

func newInstanceCache(p *Provider, freshness time.Duration) *instanceCache {
	return &instanceCache{p: p, freshness: freshness}
}

func newSnapshot(startedAt time.Time, list []stratus.Instance) *snapshot {
	return &snapshot{Index: instanceindex.New(list), startedAt: startedAt, list: list, fingerprint: fingerprintInstances(list)}
}

// fresh reports whether the snapshot may answer a question asked at or after
// notBefore.
func (s *snapshot) fresh(notBefore time.Time) bool {
	return s != nil && !s.invalidated.Load() && !s.startedAt.Before(notBefore)
}

// instances returns a copy of the listing.
func (s *snapshot) instances() []stratus.Instance {
	out := make([]stratus.Instance, len(s.list))
	for i, inst := range s.list {
		out[i] = inst
		out[i].Metadata = *copyMetadata(&inst.Metadata)
	}
	return out
}

// current returns a listing younger than the freshness window, listing when
// needed.
func (c *instanceCache) current(ctx context.Context) (*snapshot, error) {
	snap, _, err := c.get(ctx, c.freshSince(c.p.clock.Now()))
	return snap, err
}

// freshSince is the earliest start of a listing that is fresh at now.
func (c *instanceCache) freshSince(now time.Time) time.Time {
	if c.freshness <= 0 {
		return now
	}
	return now.Add(-c.freshness + 1)
}

// invalidate is the provider's watch reporting a change: the cached listing no
// longer answers questions that need a fresh one, and the cache lists again at
// once (a watching provider answers from its own index, without a cloud call),
// so that what depends on the listing without asking (KnownGone) is current
// too; that listing tells the subscribers when it differs. It does not block.
func (c *instanceCache) invalidate(ctx context.Context) {
	c.mu.Lock()
	snap := c.snap
	c.mu.Unlock()
	if snap != nil {
		snap.invalidated.Store(true)
	}
	go func() {
		ctx := WithPriority(ctx, PriorityLifecycle)
		if _, _, err := c.get(ctx, c.p.clock.Now()); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).V(2).Info("Listing after an instance change failed", "provider", c.p.name, "error", err.Error())
		}
	}()
}

// knownGone reports whether the cached listing proves that node's instance does
// not exist: it is not empty, it started after the node was created, and it
// lacks the instance. It never lists.
func (c *instanceCache) knownGone(node *v1.Node) bool {
	c.mu.Lock()
	snap := c.snap
	c.mu.Unlock()
	if snap == nil || len(snap.list) == 0 || snap.startedAt.Before(node.CreationTimestamp.Add(creationSlack)) {
		return false
	}
	return snap.Find(node) == nil
}

// lookup returns the node's instance, nil when it does not exist, ErrEmptyListing
// when the listing is empty, or the listing's error. Its errors name neither the
// provider nor the node: the Provider method that asked adds them, once.
func (c *instanceCache) lookup(ctx context.Context, node *v1.Node) (*stratus.Instance, error) {
	start := c.p.clock.Now()
	snap, listed, err := c.get(ctx, c.freshSince(start))
	if err != nil {
		return nil, err
	}
	inst := snap.Find(node)
	// A miss counts only if the listing started after the node was created (its
	// machine is older than the node object) or after this lookup began (nothing
	// fresher can be had); otherwise list again.
	notBefore := node.CreationTimestamp.Add(creationSlack)
	if start.Before(notBefore) {
		notBefore = start
	}
	if inst == nil && snap.startedAt.Before(notBefore) {
		var relisted bool
		if snap, relisted, err = c.get(ctx, notBefore); err != nil {
			return nil, err
		}
		listed = listed || relisted
		inst = snap.Find(node)
	}
	if listed {
		cacheMisses.WithLabelValues(c.p.name).Inc()
	} else {
		cacheHits.WithLabelValues(c.p.name).Inc()
	}
	if inst == nil && len(snap.list) == 0 {
		return nil, ErrEmptyListing
	}
	return inst, nil
}

// get returns a listing that started at or after notBefore: the cached one when it
// qualifies, else a new one (listed is then true), joining a listing in flight and
// listing once more if the joined one started too early.
func (c *instanceCache) get(ctx context.Context, notBefore time.Time) (snap *snapshot, listed bool, err error) {
	c.mu.Lock()
	snap = c.snap
	c.mu.Unlock()
	if snap.fresh(notBefore) {
		return snap, false, nil
	}
	for range 2 {
		if snap, err = c.listShared(ctx, notBefore); err != nil || snap.fresh(notBefore) {
			break
		}
	}
	return snap, true, err
}

// listShared makes one listing for all concurrent callers of a priority class;
// the caller that starts it first reuses a cached listing that has become good
// enough meanwhile.
func (c *instanceCache) listShared(ctx context.Context, notBefore time.Time) (*snapshot, error) {
	snap, err := shared(ctx, &c.group, "list", func(ctx context.Context) (*snapshot, error) {
		c.mu.Lock()
		cached := c.snap
		c.mu.Unlock()
		if cached.fresh(notBefore) {
			return cached, nil
		}
		lister, _ := c.p.instanceLister()
		started := c.p.clock.Now()
		list, err := call(ctx, c.p, "ListInstances", lister.ListInstances)
		if err != nil {
			return nil, err
		}
		snap := newSnapshot(started, list)
		c.mu.Lock()
		prev := c.snap
		replaced := prev == nil || !prev.startedAt.After(started)
		if replaced {
			c.snap = snap
		}
		c.mu.Unlock()
		// The first listing is a change too: before it, nothing was known gone.
		if replaced && (prev == nil || prev.fingerprint != snap.fingerprint) {
			c.p.notify(InstancesChanged)
		}
		return snap, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return snap, nil
}
