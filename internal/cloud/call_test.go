package cloud

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// ensure runs EnsureLoadBalancer through p in the background while driving the
// fake clock, and returns its result.
func ensure(t *testing.T, p *Provider, clk *clocktesting.FakeClock) (*v1.LoadBalancerStatus, error) {
	t.Helper()
	lb, ok := p.LoadBalancer()
	if !ok {
		t.Fatal("LoadBalancer not supported")
	}
	type result struct {
		status *v1.LoadBalancerStatus
		err    error
	}
	done := make(chan struct{})
	var r result
	go func() {
		defer close(done)
		r.status, r.err = lb.EnsureLoadBalancer(WithPriority(t.Context(), PriorityLBWrite), "cluster", &v1.Service{}, nil)
	}()
	drive(t, clk, time.Second, done)
	return r.status, r.err
}

// A provider reporting throttling (HTTP 429, Retry-After) makes the layer wait the
// time asked and retry; stratus_cloud_throttled_total counts each refusal.
func TestThrottlingIsHonouredByWaiting(t *testing.T) {
	name := uniqueName("throttle-test")
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	retryAfter := 5 * time.Second
	cloud := newScriptedLB("test",
		stratus.Throttled(retryAfter, errors.New("429 Too Many Requests")),
		stratus.Throttled(retryAfter, nil),
		stratus.Throttled(retryAfter, nil))
	p := NewProvider(name, cloud, WithClock(clk), WithBudget(BudgetConfig{Rate: 100, Burst: 100, MaxRetries: 5}))
	throttledBefore := counter(throttledTotal.WithLabelValues(name))
	start := clk.Now()

	status, err := ensure(t, p, clk)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	if len(status.Ingress) != 1 {
		t.Errorf("status = %+v, want the provider's ingress", status)
	}
	if got := cloud.calls.Load(); got != 4 {
		t.Errorf("provider calls = %d, want 4 (3 throttled + 1 success)", got)
	}
	if waited := clk.Since(start); waited < 3*retryAfter {
		t.Errorf("layer waited %v in total, want at least 3 x Retry-After = %v", waited, 3*retryAfter)
	}
	if got := counter(throttledTotal.WithLabelValues(name)) - throttledBefore; got != 3 {
		t.Errorf("stratus_cloud_throttled_total = %v, want 3", got)
	}
	if got := counter(requestsTotal.WithLabelValues(name, "EnsureLoadBalancer", OutcomeThrottled)); got != 3 {
		t.Errorf("throttled requests = %v, want 3", got)
	}
	if got := counter(requestsTotal.WithLabelValues(name, "EnsureLoadBalancer", OutcomeSuccess)); got != 1 {
		t.Errorf("successful requests = %v, want 1", got)
	}
}

// While a provider is throttled, other callers of the same provider wait too.
func TestThrottlingPausesEveryCaller(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	p := NewProvider(uniqueName("pause-test"), newScriptedLB("test"), WithClock(clk))
	p.budget.pause(time.Minute)

	lb, _ := p.LoadBalancer()
	done := make(chan error, 1)
	go func() {
		_, err := lb.EnsureLoadBalancer(t.Context(), "cluster", &v1.Service{}, nil)
		done <- err
	}()
	eventually(t, "the call to wait for the pause", clk.HasWaiters)
	clk.Step(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("call went through during the pause (err=%v)", err)
	default:
	}
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Throttling past the retry limit reaches the caller as the throttled error.
func TestThrottlingGivesUpAfterMaxRetries(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	errs := make([]error, 10)
	for i := range errs {
		errs[i] = stratus.Throttled(time.Second, nil)
	}
	cloud := newScriptedLB("test", errs...)
	p := NewProvider(uniqueName("throttle-limit-test"), cloud, WithClock(clk), WithBudget(BudgetConfig{Rate: 100, Burst: 100, MaxRetries: 2}))
	_, err := ensure(t, p, clk)
	var throttled *stratus.ThrottledError
	if !errors.As(err, &throttled) {
		t.Fatalf("err = %v, want a *ThrottledError", err)
	}
	if got := cloud.calls.Load(); got != 3 {
		t.Errorf("provider calls = %d, want 3 (1 + 2 retries)", got)
	}
}

// A RetryError from EnsureLoadBalancer (load balancer still provisioning) reaches
// the caller unchanged and at once: the service controller re-queues on it.
func TestRetryErrorPassesThrough(t *testing.T) {
	name := uniqueName("retryerror-test")
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	retry := cloudproviderapi.NewRetryError("load balancer is provisioning", 30*time.Second)
	cloud := newScriptedLB("test", retry)
	p := NewProvider(name, cloud, WithClock(clk))
	lb, _ := p.LoadBalancer()

	_, err := lb.EnsureLoadBalancer(t.Context(), "cluster", &v1.Service{}, nil)
	if err != retry { //nolint:errorlint // identity is the point
		t.Fatalf("err = %#v, want the provider's RetryError itself", err)
	}
	if got := cloud.calls.Load(); got != 1 {
		t.Errorf("provider calls = %d, want 1 (no retry)", got)
	}
	if clk.HasWaiters() {
		t.Error("the layer is waiting on the clock after a RetryError")
	}
	if got := counter(requestsTotal.WithLabelValues(name, "EnsureLoadBalancer", OutcomeRetryLater)); got != 1 {
		t.Errorf("retry_later requests = %v, want 1", got)
	}
}

// Transient errors are retried with backoff; others are returned at once.
func TestRetries(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		errs      []error
		wantCalls int32
		wantErr   error
	}{
		{"transient then success", []error{stratus.Transient(boom), stratus.Transient(boom)}, 3, nil},
		{"transient past the limit", []error{stratus.Transient(boom), stratus.Transient(boom), stratus.Transient(boom), stratus.Transient(boom)}, 4, boom},
		{"permanent error", []error{boom}, 1, boom},
		{"instance not found", []error{cloudprovider.InstanceNotFound}, 1, cloudprovider.InstanceNotFound},
		{"implemented elsewhere", []error{cloudprovider.ImplementedElsewhere}, 1, cloudprovider.ImplementedElsewhere},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			cloud := newScriptedLB("test", tc.errs...)
			p := NewProvider(uniqueName("retries-test"), cloud, WithClock(clk)) // default: 3 retries
			_, err := ensure(t, p, clk)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if got := cloud.calls.Load(); got != tc.wantCalls {
				t.Errorf("provider calls = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

// Metrics count each call by provider, method and outcome, and record durations.
func TestMetricsCountCalls(t *testing.T) {
	name := uniqueName("metrics-test")
	cloud := newScriptedLB("test", errors.New("boom"))
	p := NewProvider(name, cloud, WithBudget(BudgetConfig{Rate: 5, Burst: 7}))
	lb, _ := p.LoadBalancer()
	for range 3 {
		_, _ = lb.EnsureLoadBalancer(t.Context(), "cluster", &v1.Service{}, nil)
	}
	if got := counter(requestsTotal.WithLabelValues(name, "EnsureLoadBalancer", OutcomeError)); got != 1 {
		t.Errorf("error outcomes = %v, want 1", got)
	}
	if got := counter(requestsTotal.WithLabelValues(name, "EnsureLoadBalancer", OutcomeSuccess)); got != 2 {
		t.Errorf("success outcomes = %v, want 2", got)
	}
	if got := countSamples(t, "stratus_cloud_request_duration_seconds", name); got != 3 {
		t.Errorf("duration samples = %v, want 3", got)
	}
	// Three of seven tokens were taken moments ago (the bucket refills at 5/s).
	if got := budgetGauge(t, name); got < 4 || got > 7 {
		t.Errorf("stratus_cloud_budget_available = %v, want between 4 and 7", got)
	}
}

// The wrapped capabilities all go through the layer.
func TestWrappedCapabilitiesAreBudgeted(t *testing.T) {
	name := uniqueName("wrapped-test")
	cloud := newScriptedLB("test")
	cloud.RouteMap = map[string]*fake.Route{}
	p := NewProvider(name, cloud)
	ctx := context.Background()

	r, _ := p.Routes()
	if err := r.CreateRoute(ctx, "c", "hint", &cloudprovider.Route{TargetNode: "n1", DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	routes, err := r.ListRoutes(ctx, "c")
	if err != nil || len(routes) != 1 {
		t.Fatalf("ListRoutes = %v, %v; want the created route", routes, err)
	}
	inst, _ := p.Instances()
	if _, err := inst.InstanceTypeByProviderID(ctx, "test://x"); err != nil {
		t.Fatal(err)
	}
	z, _ := p.Zones()
	if _, err := z.GetZoneByProviderID(ctx, "test://x"); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"CreateRoute", "ListRoutes", "InstanceTypeByProviderID", "GetZoneByProviderID"} {
		if got := counter(requestsTotal.WithLabelValues(name, method, OutcomeSuccess)); got != 1 {
			t.Errorf("%s successes = %v, want 1", method, got)
		}
	}
}

// A caller that gives up while waiting out a throttling pause still learns why.
func TestAbandonedThrottledCallKeepsCause(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	cloud := newScriptedLB("test", stratus.Throttled(time.Hour, nil))
	p := NewProvider(uniqueName("throttle-abandon-test"), cloud, WithClock(clk))
	lb, _ := p.LoadBalancer()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := lb.EnsureLoadBalancer(ctx, "cluster", &v1.Service{}, nil)
		done <- err
	}()
	eventually(t, "the call to wait out the pause", clk.HasWaiters)
	cancel()
	err := <-done
	var throttled *stratus.ThrottledError
	if !errors.As(err, &throttled) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want both the ThrottledError and context.Canceled", err)
	}
	if got := cloud.calls.Load(); got != 1 {
		t.Errorf("provider calls = %d, want 1", got)
	}
}
