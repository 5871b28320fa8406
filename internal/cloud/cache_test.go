package cloud

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func newCachedProvider(t *testing.T, name string, cloud *listingCloud) (*Provider, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	return NewProvider(name, cloud, WithClock(clk), WithInstanceCacheFreshness(30*time.Second)), clk
}

// Instance questions are answered from one listing: metadata, existence and
// shutdown state, by provider ID or, for nodes without one, by instance name.
func TestCacheServesInstanceQuestions(t *testing.T) {
	name := uniqueName("cache-serve-test")
	cloud := newListingCloud(instance("a", false), instance("b", true))
	p, _ := newCachedProvider(t, name, cloud)
	ctx := t.Context()

	md, err := p.InstanceMetadata(ctx, node("a", "test://a"))
	if err != nil {
		t.Fatal(err)
	}
	want := instance("a", false).Metadata
	if diff := cmp.Diff(&want, md); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	md.NodeAddresses[0].Address = "changed by caller"
	if md2, _ := p.InstanceMetadata(ctx, node("a", "test://a")); md2.NodeAddresses[0].Address != "10.0.0.1" {
		t.Error("a caller's change to returned metadata leaked into the cache")
	}
	if md, err := p.InstanceMetadata(ctx, node("b", "")); err != nil || md.ProviderID != "test://b" {
		t.Errorf("metadata of node b without provider ID = %+v, %v; want instance b's", md, err)
	}
	for _, tc := range []struct {
		node               string
		exists, isShutdown bool
	}{{"a", true, false}, {"b", true, true}, {"gone", false, false}} {
		n := node(tc.node, "test://"+tc.node)
		if got, err := p.InstanceExists(ctx, n); err != nil || got != tc.exists {
			t.Errorf("InstanceExists(%s) = %v, %v; want %v", tc.node, got, err, tc.exists)
		}
		if got, err := p.InstanceShutdown(ctx, n); err != nil || got != tc.isShutdown {
			t.Errorf("InstanceShutdown(%s) = %v, %v; want %v", tc.node, got, err, tc.isShutdown)
		}
	}
	if _, err := p.InstanceMetadata(ctx, node("gone", "test://gone")); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("metadata of a missing instance: err = %v, want InstanceNotFound", err)
	}
	if got := cloud.lists.Load(); got != 1 {
		t.Errorf("listings = %d, want 1", got)
	}
	if len(cloud.Calls) != 0 {
		t.Errorf("per-node provider calls %v, want none", cloud.Calls)
	}
	if hits, misses := counter(cacheHits.WithLabelValues(name)), counter(cacheMisses.WithLabelValues(name)); misses != 1 || hits < 8 {
		t.Errorf("cache hits/misses = %v/%v, want >= 8 / 1", hits, misses)
	}
}

// The listing is refreshed after the freshness window.
func TestCacheRelistsWhenStale(t *testing.T) {
	cloud := newListingCloud(instance("a", false))
	p, clk := newCachedProvider(t, uniqueName("cache-stale-test"), cloud)
	n := node("a", "test://a")
	if _, err := p.InstanceExists(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	clk.Step(29 * time.Second)
	if _, err := p.InstanceExists(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	if got := cloud.lists.Load(); got != 1 {
		t.Fatalf("listings within the freshness window = %d, want 1", got)
	}
	cloud.set(nil, instance("a", true))
	clk.Step(time.Second)
	if down, err := p.InstanceShutdown(t.Context(), n); err != nil || !down {
		t.Errorf("InstanceShutdown after the window = %v, %v; want true from a new listing", down, err)
	}
	if got := cloud.lists.Load(); got != 2 {
		t.Errorf("listings = %d, want 2", got)
	}
}

// A node that joined after the listing was taken, whose instance the listing lacks,
// forces one new listing; an old node missing from a listing does not.
func TestCacheForcesRelistForNewNode(t *testing.T) {
	cloud := newListingCloud(instance("old", false))
	p, clk := newCachedProvider(t, uniqueName("cache-new-node-test"), cloud)
	ctx := t.Context()
	if _, err := p.InstanceExists(ctx, node("old", "test://old")); err != nil {
		t.Fatal(err)
	}

	clk.Step(5 * time.Second)
	cloud.set(nil, instance("old", false), instance("new", false))
	fresh := node("new", "test://new")
	fresh.CreationTimestamp = metav1.NewTime(clk.Now())
	md, err := p.InstanceMetadata(ctx, fresh)
	if err != nil {
		t.Fatalf("metadata of the new node: %v", err)
	}
	if md.ProviderID != "test://new" {
		t.Errorf("provider ID = %q, want test://new", md.ProviderID)
	}
	if got := cloud.lists.Load(); got != 2 {
		t.Errorf("listings = %d, want 2 (one forced)", got)
	}

	// An old node (created long before the listing) is simply gone.
	if exists, err := p.InstanceExists(ctx, node("deleted", "test://deleted")); err != nil || exists {
		t.Errorf("InstanceExists(deleted) = %v, %v; want false, nil", exists, err)
	}
	if got := cloud.lists.Load(); got != 2 {
		t.Errorf("listings = %d, want still 2", got)
	}
}

// A failed listing is an error, never "does not exist"; an empty listing answers
// nothing (ErrEmptyListing), since an API outage often looks like an empty list.
func TestCacheNeverReportsGoneOnFailedOrEmptyListing(t *testing.T) {
	boom := errors.New("cloud API down")
	for _, tc := range []struct {
		name    string
		listErr error
		wantErr error
	}{
		{"listing fails", boom, boom},
		{"listing is empty", nil, ErrEmptyListing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cloud := newListingCloud()
			cloud.set(tc.listErr)
			p, _ := newCachedProvider(t, uniqueName("cache-empty-test"), cloud)
			n := node("a", "test://a")
			exists, err := p.InstanceExists(t.Context(), n)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("InstanceExists err = %v, want %v", err, tc.wantErr)
			}
			if exists {
				t.Error("InstanceExists = true with no listing")
			}
			if _, err := p.InstanceShutdown(t.Context(), n); !errors.Is(err, tc.wantErr) {
				t.Errorf("InstanceShutdown err = %v, want %v", err, tc.wantErr)
			}
			if _, err := p.InstanceMetadata(t.Context(), n); !errors.Is(err, tc.wantErr) {
				t.Errorf("InstanceMetadata err = %v, want %v", err, tc.wantErr)
			}
			if _, ok, err := p.ListInstances(t.Context()); !ok || (tc.listErr != nil) != (err != nil) {
				t.Errorf("ListInstances = ok %v, err %v", ok, err)
			}
		})
	}
}

// Concurrent questions while no listing is fresh share one listing.
func TestCacheCoalescesConcurrentListings(t *testing.T) {
	cloud := newListingCloud(instance("a", false))
	cloud.gate = make(chan struct{})
	p, _ := newCachedProvider(t, uniqueName("cache-coalesce-test"), cloud)

	const callers = 10
	var wg sync.WaitGroup
	var started sync.WaitGroup
	started.Add(callers)
	for range callers {
		wg.Go(func() {
			started.Done()
			if exists, err := p.InstanceExists(t.Context(), node("a", "test://a")); err != nil || !exists {
				t.Errorf("InstanceExists = %v, %v", exists, err)
			}
		})
	}
	started.Wait()
	eventually(t, "the listing to start", func() bool { return cloud.lists.Load() >= 1 })
	close(cloud.gate)
	wg.Wait()
	if got := cloud.lists.Load(); got != 1 {
		t.Errorf("listings = %d, want 1 for %d concurrent callers", got, callers)
	}
}

// Without an InstanceLister, each question is a per-node call through the budget;
// identical concurrent questions are coalesced.
func TestPerNodeCallsWithoutLister(t *testing.T) {
	name := uniqueName("per-node-test")
	gate := make(chan struct{})
	var calls sync.Mutex
	n := 0
	cloud := &fake.Cloud{Provider: "test", EnableInstancesV2: true,
		OverrideInstanceMetadata: func(ctx context.Context, _ *v1.Node) (*cloudprovider.InstanceMetadata, error) {
			calls.Lock()
			n++
			calls.Unlock()
			<-gate
			return &cloudprovider.InstanceMetadata{ProviderID: "test://a", InstanceType: "big"}, nil
		}}
	p := NewProvider(name, cloud)
	if _, ok, _ := p.ListInstances(t.Context()); ok {
		t.Fatal("ListInstances ok for a provider without InstanceLister")
	}
	var wg, started sync.WaitGroup
	started.Add(5)
	for range 5 {
		wg.Go(func() {
			started.Done()
			md, err := p.InstanceMetadata(t.Context(), node("a", "test://a"))
			if err != nil || md.InstanceType != "big" {
				t.Errorf("InstanceMetadata = %+v, %v", md, err)
			}
		})
	}
	started.Wait()
	eventually(t, "all callers waiting on the first call", func() bool {
		calls.Lock()
		defer calls.Unlock()
		return n == 1 && p.coalescing.Load() == 5
	})
	close(gate)
	wg.Wait()
	// All five were inside coalesce while the first call was blocked. A caller
	// preempted between entering coalesce and joining the call may, rarely, arrive
	// after the call ended and make a second one; without coalescing there are 5.
	if got := counter(requestsTotal.WithLabelValues(name, "InstanceMetadata", OutcomeSuccess)); got > 2 {
		t.Errorf("InstanceMetadata calls = %v, want 1 (rarely 2) for 5 identical concurrent questions", got)
	}
	cloud.ExistsByProviderID = true
	if exists, err := p.InstanceExists(t.Context(), node("a", "test://a")); err != nil || !exists {
		t.Errorf("InstanceExists = %v, %v", exists, err)
	}
	if got := counter(requestsTotal.WithLabelValues(name, "InstanceExists", OutcomeSuccess)); got != 1 {
		t.Errorf("InstanceExists calls = %v, want 1", got)
	}
}

// A caller waiting on a shared call started by a caller who then went away gets an
// answer, not the other caller's cancellation.
func TestSharedCallSurvivesItsStarterLeaving(t *testing.T) {
	gate := make(chan struct{})
	var calls sync.Mutex
	n := 0
	cloud := &fake.Cloud{Provider: "test", EnableInstancesV2: true,
		OverrideInstanceMetadata: func(ctx context.Context, _ *v1.Node) (*cloudprovider.InstanceMetadata, error) {
			calls.Lock()
			n++
			calls.Unlock()
			select {
			case <-gate:
				return &cloudprovider.InstanceMetadata{ProviderID: "test://a"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}
	p := NewProvider(uniqueName("lender-test"), cloud)
	starterCtx, cancel := context.WithCancel(t.Context())
	starter := make(chan error, 1)
	go func() {
		_, err := p.InstanceMetadata(starterCtx, node("a", "test://a"))
		starter <- err
	}()
	eventually(t, "the first call", func() bool { calls.Lock(); defer calls.Unlock(); return n == 1 })
	joiner := make(chan error, 1)
	go func() {
		_, err := p.InstanceMetadata(t.Context(), node("a", "test://a"))
		joiner <- err
	}()
	eventually(t, "the second caller to join", func() bool { return p.coalescing.Load() == 2 })
	cancel()
	if err := <-starter; !errors.Is(err, context.Canceled) {
		t.Errorf("starter err = %v, want context.Canceled", err)
	}
	close(gate)
	if err := <-joiner; err != nil {
		t.Errorf("joiner err = %v, want an answer", err)
	}
}

// A node-initialization question does not wait for a listing started at refresh
// priority (which may queue behind many calls): classes list separately.
func TestListingsDoNotMixPriorities(t *testing.T) {
	cloud := newListingCloud(instance("a", false))
	cloud.gate = make(chan struct{})
	p, _ := newCachedProvider(t, uniqueName("cache-prio-test"), cloud)
	var wg sync.WaitGroup
	for _, prio := range []Priority{PriorityRefresh, PriorityNodeInit} {
		wg.Go(func() {
			if _, err := p.InstanceExists(WithPriority(t.Context(), prio), node("a", "test://a")); err != nil {
				t.Error(err)
			}
		})
	}
	eventually(t, "two listings, one per class", func() bool { return cloud.lists.Load() == 2 })
	close(cloud.gate)
	wg.Wait()
}

// An instance whose listing entry says its metadata is incomplete exists, but
// its metadata is that error, so that its node is not initialized without
// addresses.
func TestCacheMetadataError(t *testing.T) {
	noIPs := instance("a", false)
	noIPs.MetadataErr = errors.New("VM a has no IP addresses yet")
	cloud := newListingCloud(noIPs)
	p, _ := newCachedProvider(t, uniqueName("cache-metadata-error-test"), cloud)
	n := node("a", "test://a")
	if md, err := p.InstanceMetadata(t.Context(), n); !errors.Is(err, noIPs.MetadataErr) {
		t.Errorf("InstanceMetadata = %+v, %v; want the instance's metadata error", md, err)
	}
	if exists, err := p.InstanceExists(t.Context(), n); err != nil || !exists {
		t.Errorf("InstanceExists = %v, %v; want true", exists, err)
	}
	if p.KnownGone(n) {
		t.Error("known gone")
	}
}
