package cloud

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cloud-provider/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// changes records what a provider told its subscribers.
type changes struct {
	mu  sync.Mutex
	got []Change
}

func (c *changes) record(ch Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ch)
}

func (c *changes) list() []Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// A listing that lacks an instance makes its node known gone, without another
// listing; a listing that differs from the previous one is announced.
func TestKnownGoneFromListing(t *testing.T) {
	cloud := newListingCloud(instance("a", false), instance("b", false))
	p, clk := newCachedProvider(t, uniqueName("known-gone-test"), cloud)
	var seen changes
	p.Subscribe(seen.record)
	a, b := node("a", "test://a"), node("b", "test://b")

	if p.KnownGone(a) || p.KnownGone(b) {
		t.Fatal("known gone before any listing")
	}
	if _, _, err := p.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p.KnownGone(a) || p.KnownGone(b) {
		t.Error("known gone while listed")
	}
	if got := seen.list(); !slices.Equal(got, []Change{InstancesChanged}) {
		t.Errorf("changes after the first listing = %v, want [InstancesChanged]: before it nothing was known", got)
	}

	cloud.set(nil, instance("a", false))
	clk.Step(time.Minute)
	if _, _, err := p.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !p.KnownGone(b) {
		t.Error("b is not known gone after a listing without it")
	}
	if p.KnownGone(a) {
		t.Error("a is known gone though listed")
	}
	if got := seen.list(); !slices.Equal(got, []Change{InstancesChanged, InstancesChanged}) {
		t.Errorf("changes = %v, want two InstancesChanged", got)
	}
	lists := cloud.lists.Load()
	for range 3 {
		p.KnownGone(b)
	}
	if cloud.lists.Load() != lists {
		t.Error("KnownGone listed")
	}

	// A node created after the listing started is not judged by it, nor is a
	// node without provider ID.
	young := node("c", "test://c")
	young.CreationTimestamp = metav1.NewTime(clk.Now())
	if p.KnownGone(young) {
		t.Error("a node younger than the listing is known gone")
	}
	if p.KnownGone(node("d", "")) {
		t.Error("a node without provider ID is known gone")
	}

	// An unchanged listing is not announced; a power change is.
	clk.Step(time.Minute)
	if _, _, err := p.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	cloud.set(nil, instance("a", true))
	clk.Step(time.Minute)
	if _, _, err := p.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := seen.list(); !slices.Equal(got, []Change{InstancesChanged, InstancesChanged, InstancesChanged}) {
		t.Errorf("changes = %v, want three InstancesChanged (first listing, b gone, a stopped)", got)
	}
}

// Failed and empty listings prove nothing: the previous successful listing
// still answers, and an empty one makes nothing gone.
func TestKnownGoneNeverFromFailedOrEmptyListing(t *testing.T) {
	cloud := newListingCloud(instance("a", false))
	p, clk := newCachedProvider(t, uniqueName("known-gone-empty-test"), cloud)
	a := node("a", "test://a")
	if _, _, err := p.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	cloud.set(errors.New("cloud API down"))
	clk.Step(time.Minute)
	if _, _, err := p.ListInstances(t.Context()); err == nil {
		t.Fatal("the failing listing succeeded")
	}
	if p.KnownGone(a) {
		t.Error("known gone after a failed listing")
	}
	cloud.set(nil)
	clk.Step(time.Minute)
	if _, _, err := p.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p.KnownGone(a) {
		t.Error("known gone after an empty listing")
	}
}

// For a provider that cannot list, InstanceExists answers are remembered.
func TestKnownGoneFromInstanceExists(t *testing.T) {
	cloud := &fake.Cloud{Provider: "test", EnableInstancesV2: true, ExistsByProviderID: false}
	p := NewProvider(uniqueName("known-gone-v2-test"), cloud)
	var seen changes
	p.Subscribe(seen.record)
	a := node("a", "test://a")
	if exists, err := p.InstanceExists(t.Context(), a); err != nil || exists {
		t.Fatalf("InstanceExists = %v, %v", exists, err)
	}
	if !p.KnownGone(a) {
		t.Error("not known gone after InstanceExists said so")
	}
	cloud.ExistsByProviderID = true
	if exists, err := p.InstanceExists(t.Context(), a); err != nil || !exists {
		t.Fatalf("InstanceExists = %v, %v", exists, err)
	}
	if p.KnownGone(a) {
		t.Error("still known gone after InstanceExists found it")
	}
	if got := seen.list(); !slices.Equal(got, []Change{InstancesChanged, InstancesChanged}) {
		t.Errorf("changes = %v, want two InstancesChanged", got)
	}
}

// The provider recovers when a call succeeds after an outage: outageCalls
// calls in a row that failed with transient errors. One failure among
// successes is no outage.
func TestRecoveredAfterOutage(t *testing.T) {
	down := stratus.Transient(errors.New("connection refused"))
	// Each Ensure is retried maxRetries times by the layer; with no retries,
	// every failure is one final outcome.
	lb := newScriptedLB("test", down, nil, down, down, down, nil, nil)
	p := NewProvider(uniqueName("recovered-test"), lb, WithBudget(BudgetConfig{MaxRetries: -1}))
	var seen changes
	p.Subscribe(seen.record)
	wrapped, _ := p.LoadBalancer()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	var got []bool
	for range 7 {
		_, err := wrapped.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nil)
		got = append(got, err == nil)
		if err == nil {
			continue
		}
		if !stratus.IsTransient(err) {
			t.Fatalf("err = %v, want transient", err)
		}
	}
	if want := []bool{false, true, false, false, false, true, true}; !slices.Equal(got, want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	if got := seen.list(); !slices.Equal(got, []Change{Recovered}) {
		t.Errorf("changes = %v, want one Recovered (after the three failures in a row)", got)
	}
	if n := counter(recoveries.WithLabelValues(p.Name())); n != 1 {
		t.Errorf("stratus_cloud_recoveries_total = %v, want 1", n)
	}
}

// watchingCloud is a listing provider whose changes are announced by its
// watch: the test calls fire to report one.
type watchingCloud struct {
	*listingCloud
	mu      sync.Mutex
	changed func()
	started chan struct{}
	fail    error // returned at once by the next WatchInstances
}

var _ stratus.InstanceWatcher = (*watchingCloud)(nil)

func (w *watchingCloud) WatchInstances(ctx context.Context, changed func()) error {
	w.mu.Lock()
	if err := w.fail; err != nil {
		w.fail = nil
		w.mu.Unlock()
		return err
	}
	w.changed = changed
	w.mu.Unlock()
	w.started <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

func (w *watchingCloud) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changed()
}

// A watch's change makes the next question list again, even within the
// freshness window, and is announced; a failed watch is restarted.
func TestWatchInvalidatesListing(t *testing.T) {
	w := &watchingCloud{listingCloud: newListingCloud(instance("a", false), instance("b", false)), started: make(chan struct{}, 1),
		fail: errors.New("collector lost")}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	p := NewProvider(uniqueName("watch-test"), w, WithClock(clk), WithInstanceCacheFreshness(30*time.Second))
	var seen changes
	p.Subscribe(seen.record)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.WatchInstances(ctx) }()
	// The fake clock is driven through the restart backoff after the first
	// failure until the watch runs again.
	restarted := make(chan struct{})
	go func() { <-w.started; close(restarted) }()
	drive(t, clk, time.Second, restarted)

	if _, _, err := p.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	lists := w.lists.Load()
	w.set(nil, instance("a", false))
	// The watch reports b's machine gone: the cache lists again by itself
	// (no controller has to ask), so KnownGone is current, and the listing,
	// which differs, is announced.
	w.fire()
	eventually(t, "b known gone after the watch's change", func() bool { return p.KnownGone(node("b", "test://b")) })
	eventually(t, "the change announced", func() bool {
		return slices.Equal(seen.list(), []Change{InstancesChanged, InstancesChanged})
	})
	if got := w.lists.Load(); got != lists+1 {
		t.Errorf("listings after the change = %d, want 1", got-lists)
	}
	// Questions are answered from that listing, without another.
	list, _, err := p.ListInstances(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || w.lists.Load() != lists+1 {
		t.Errorf("after the change: %d instances in %d new listings, want 1 in 1", len(list), w.lists.Load()-lists)
	}
	if got := seen.list(); len(got) != 2 {
		t.Errorf("changes = %v, want no more after an unchanged answer", got)
	}
	cancel()
	<-done
	if n := counter(watchRestarts.WithLabelValues(p.Name())); n != 1 {
		t.Errorf("stratus_cloud_instance_watch_restarts_total = %v, want 1", n)
	}
}
