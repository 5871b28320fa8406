package dataplane

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestCheckerThresholds(t *testing.T) {
	fail := errors.New("refused")
	opts := Options{UnhealthyThreshold: 2, HealthyThreshold: 3}
	for _, tc := range []struct {
		name    string
		results []error
		want    string
	}{
		{"no probe yet", nil, "unknown"},
		{"first success decides", []error{nil}, "healthy"},
		{"first failure decides", []error{fail}, "unhealthy"},
		{"one failure is not enough", []error{nil, fail}, "healthy"},
		{"two failures flip", []error{nil, fail, fail}, "unhealthy"},
		{"a success resets the streak", []error{nil, fail, nil, fail}, "healthy"},
		{"recovery needs three", []error{fail, nil, nil}, "unhealthy"},
		{"recovered", []error{fail, nil, nil, nil}, "healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &checker{state: Health{State: "unknown"}}
			for _, r := range tc.results {
				c.record(r, opts)
			}
			if got := c.current(); got.State != tc.want {
				t.Fatalf("state %+v, want %s", got, tc.want)
			}
		})
	}
}

func TestCheckersAreSharedAcrossLoadBalancers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := New(ctx, logr.Discard(), Options{})
	defer p.Close()
	spec := func(hcPort int) Spec {
		return Spec{
			VIP:         netip.MustParseAddr("127.0.0.1"),
			Listeners:   []Listener{{Protocol: "TCP", Port: 0, TargetPort: 1}},
			Backends:    []Backend{{Addr: netip.MustParseAddr("127.0.0.1")}, {Addr: netip.MustParseAddr("127.0.0.2")}, {Addr: netip.MustParseAddr("127.0.0.3"), Down: "instance stopped"}},
			HealthCheck: HealthCheck{Protocol: "TCP", Port: hcPort, Interval: time.Hour},
		}
	}
	count := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.checkers)
	}
	for _, step := range []struct {
		name string
		do   func() error
		want int
	}{
		{"first LB", func() error { return p.Apply("a", spec(1)) }, 2},
		{"second LB, same checks", func() error { return p.Apply("b", spec(1)) }, 2},
		{"first LB re-applied unchanged", func() error { return p.Apply("a", spec(1)) }, 2},
		{"second LB checks another port", func() error { return p.Apply("b", spec(2)) }, 4},
		{"first LB removed", func() error { p.Remove("a"); return nil }, 2},
		{"second LB removed", func() error { p.Remove("b"); return nil }, 0},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := count(); got != step.want {
			t.Fatalf("%s: %d checkers, want %d", step.name, got, step.want)
		}
	}
}

func TestListenerBoundWhenThePortFrees(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := New(ctx, logr.Discard(), Options{RebindInterval: 20 * time.Millisecond})
	defer p.Close()
	// Someone else holds the port first.
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := squatter.Addr().(*net.TCPAddr).Port
	spec := Spec{VIP: netip.MustParseAddr("127.0.0.1"), Listeners: []Listener{{Protocol: "TCP", Port: port, TargetPort: 1}}}
	if err := p.Apply("a", spec); err == nil {
		t.Fatal("Apply on a taken port reported no error")
	}
	squatter.Close()
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.lbs["a"].missing) == 0 && p.lbs["a"].listeners[listenerKey{"TCP", port}] != nil, nil
	})
	if err != nil {
		t.Fatalf("listener not bound after the port was freed: %v", err)
	}
}
