package cloud

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// grantLog records the order in which callers got the budget.
type grantLog struct {
	mu    sync.Mutex
	order []string
}

func (g *grantLog) add(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.order = append(g.order, id)
}

func (g *grantLog) snapshot() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

// acquireAsync queues a caller; it records its grant and releases at once, or
// reports its error on errs.
func acquireAsync(ctx context.Context, b *budget, prio Priority, id string, log *grantLog, errs chan<- error) {
	go func() {
		release, err := b.acquire(ctx, prio)
		if err != nil {
			errs <- err
			return
		}
		log.add(id)
		release()
	}()
}

// With a budget of 1 request/s and low-priority calls already queued, a node
// initialization call goes first; same-class calls keep their order.
func TestBudgetPriorityUnderContention(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	b := newBudget(clk, 1, 1, 0)
	ctx := t.Context()

	release, err := b.acquire(ctx, PriorityRefresh) // takes the only token
	if err != nil {
		t.Fatal(err)
	}
	release()

	var log grantLog
	errs := make(chan error, 10)
	for i := range 3 {
		acquireAsync(ctx, b, PriorityRefresh, fmt.Sprintf("refresh-%d", i), &log, errs)
		eventually(t, "refresh call queued", func() bool { return b.waiting() == i+1 })
	}
	acquireAsync(ctx, b, PriorityLBUpdate, "lb-update", &log, errs)
	eventually(t, "lb-update queued", func() bool { return b.waiting() == 4 })
	acquireAsync(ctx, b, PriorityNodeInit, "node-init", &log, errs)
	eventually(t, "node-init queued", func() bool { return b.waiting() == 5 })

	for n := 1; n <= 5; n++ {
		if got := len(log.snapshot()); got != n-1 {
			t.Fatalf("%d calls went through before the clock moved %d s; want %d", got, n, n-1)
		}
		clk.Step(time.Second)
		eventually(t, fmt.Sprintf("grant %d", n), func() bool { return len(log.snapshot()) == n })
	}
	want := []string{"node-init", "lb-update", "refresh-0", "refresh-1", "refresh-2"}
	if diff := cmp.Diff(want, log.snapshot()); diff != "" {
		t.Errorf("grant order (-want +got):\n%s", diff)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// A steady stream of higher-priority calls cannot starve a lower class: it is
// served after at most starvationLimit grants to others.
func TestBudgetStarvationIsBounded(t *testing.T) {
	b := newBudget(clocktesting.NewFakeClock(time.Now()), 0, 0, 1) // one call at a time
	ctx := t.Context()
	hold, err := b.acquire(ctx, PriorityNodeInit)
	if err != nil {
		t.Fatal(err)
	}

	var log grantLog
	errs := make(chan error, 100)
	acquireAsync(ctx, b, PriorityRefresh, "refresh", &log, errs)
	eventually(t, "refresh queued", func() bool { return b.waiting() == 1 })
	const highs = 3 * starvationLimit
	for i := range highs {
		acquireAsync(ctx, b, PriorityNodeInit, fmt.Sprintf("init-%d", i), &log, errs)
	}
	eventually(t, "all queued", func() bool { return b.waiting() == highs+1 })
	hold()
	eventually(t, "all served", func() bool { return len(log.snapshot()) == highs+1 })

	order := log.snapshot()
	pos := -1
	for i, id := range order {
		if id == "refresh" {
			pos = i
		}
	}
	// The held call was grant 1; the refresh call became head then.
	if pos < 1 || pos > starvationLimit {
		t.Errorf("refresh call served at position %d of %v; want after some node-init calls and within %d grants", pos, order, starvationLimit)
	}
}

// The concurrency cap holds: never more than MaxConcurrent provider calls at once.
func TestBudgetConcurrencyCap(t *testing.T) {
	cloud := newScriptedLB("test")
	cloud.gate = make(chan struct{})
	p := NewProvider("cap-test", cloud, WithBudget(BudgetConfig{Rate: 1000, Burst: 1000, MaxConcurrent: 2}))
	lb, _ := p.LoadBalancer()

	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if _, err := lb.EnsureLoadBalancer(t.Context(), "c", nil, nil); err != nil {
				t.Error(err)
			}
		})
	}
	eventually(t, "two calls in the provider, three queued", func() bool {
		return cloud.inFlight.Load() == 2 && p.budget.waiting() == 3
	})
	close(cloud.gate)
	wg.Wait()
	if got := cloud.maxSeen.Load(); got != 2 {
		t.Errorf("max concurrent calls = %d, want 2", got)
	}
	if got := cloud.calls.Load(); got != 5 {
		t.Errorf("calls = %d, want 5", got)
	}
}

// A caller whose context ends leaves the queue, and the next in line goes on.
func TestBudgetCanceledWaiterLeavesQueue(t *testing.T) {
	b := newBudget(clocktesting.NewFakeClock(time.Now()), 0, 0, 1)
	hold, err := b.acquire(t.Context(), PriorityRefresh)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var log grantLog
	errs := make(chan error, 2)
	acquireAsync(ctx, b, PriorityNodeInit, "canceled", &log, errs)
	eventually(t, "queued", func() bool { return b.waiting() == 1 })
	acquireAsync(t.Context(), b, PriorityRefresh, "next", &log, errs)
	eventually(t, "queued", func() bool { return b.waiting() == 2 })
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled waiter got %v, want context.Canceled", err)
	}
	hold()
	eventually(t, "next served", func() bool { return len(log.snapshot()) == 1 })
	if diff := cmp.Diff([]string{"next"}, log.snapshot()); diff != "" {
		t.Errorf("grants (-want +got):\n%s", diff)
	}
	if b.waiting() != 0 {
		t.Errorf("%d callers still queued", b.waiting())
	}
}

// Through a Provider, the priority in the caller's context decides: with a budget
// of 1 request/s, a node-initialization call overtakes queued refresh calls.
func TestProviderCallsHonourContextPriority(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	cloud := newScriptedLB("test")
	p := NewProvider(uniqueName("priority-test"), cloud, WithClock(clk), WithBudget(BudgetConfig{Rate: 1, Burst: 1}))
	lb, _ := p.LoadBalancer()
	ensure := func(prio Priority, name string) {
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := lb.EnsureLoadBalancer(WithPriority(t.Context(), prio), "cluster", svc, nil); err != nil {
			t.Error(err)
		}
	}
	ensure(PriorityRefresh, "first") // takes the only token

	var wg sync.WaitGroup
	for i, name := range []string{"refresh-0", "refresh-1", "refresh-2"} {
		wg.Go(func() { ensure(PriorityRefresh, name) })
		eventually(t, name+" queued", func() bool { return p.budget.waiting() == i+1 })
	}
	wg.Go(func() { ensure(PriorityNodeInit, "node-init") })
	eventually(t, "node-init queued", func() bool { return p.budget.waiting() == 4 })
	for n := 2; n <= 5; n++ {
		clk.Step(time.Second)
		eventually(t, fmt.Sprintf("call %d", n), func() bool { return len(cloud.ensured()) == n })
	}
	wg.Wait()
	want := []string{"first", "node-init", "refresh-0", "refresh-1", "refresh-2"}
	if diff := cmp.Diff(want, cloud.ensured()); diff != "" {
		t.Errorf("call order (-want +got):\n%s", diff)
	}
}
