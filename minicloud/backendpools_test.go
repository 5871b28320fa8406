package minicloud_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

func TestBackendPoolValidation(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	ctx := context.Background()
	c := f.mc.Client
	for _, tc := range []struct {
		name string
		spec api.BackendPoolSpec
		want string
	}{
		{"no name", api.BackendPoolSpec{}, "backend pool name"},
		{"target with both", api.BackendPoolSpec{Name: "p", Targets: []api.Target{{InstanceID: f.a.ID, IP: "10.0.0.1"}}}, "exactly one of"},
		{"duplicate target", api.BackendPoolSpec{Name: "p", Targets: []api.Target{{InstanceID: f.a.ID}, {InstanceID: f.a.ID}}}, "duplicate target"},
		{"missing instance", api.BackendPoolSpec{Name: "p", Targets: []api.Target{{InstanceID: "i-99999999"}}}, "does not exist"},
	} {
		_, err := c.CreateBackendPool(ctx, tc.spec)
		if !client.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: create = %v, want 400 mentioning %q", tc.name, err, tc.want)
		}
	}
	p, err := c.CreateBackendPool(ctx, api.BackendPoolSpec{Name: "nodes", Targets: []api.Target{{InstanceID: f.a.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBackendPool(ctx, api.BackendPoolSpec{Name: "nodes"}); !client.IsConflict(err) {
		t.Errorf("second pool named nodes: %v, want 409", err)
	}
	if _, err := c.UpdateBackendPool(ctx, p.ID, api.BackendPoolSpec{Name: "other"}); !client.IsInvalid(err) {
		t.Errorf("rename: %v, want 400", err)
	}
	lbSpec := api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{{Protocol: "TCP", Port: 18090, TargetPort: f.port}}}
	for _, tc := range []struct {
		name  string
		pools []string
		want  string
	}{
		{"unknown pool", []string{"absent"}, `backend pool "absent" does not exist`},
		{"duplicate pool", []string{"nodes", "nodes"}, "duplicate backend pool"},
		{"empty name", []string{""}, "must not be empty"},
	} {
		spec := lbSpec
		spec.BackendPools = tc.pools
		if _, err := c.CreateLoadBalancer(ctx, spec); !client.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: create load balancer = %v, want 400 mentioning %q", tc.name, err, tc.want)
		}
		if err := c.ValidateLoadBalancer(ctx, spec); !client.IsInvalid(err) {
			t.Errorf("%s: validate load balancer = %v, want 400", tc.name, err)
		}
	}
	spec := lbSpec
	spec.BackendPools = []string{"nodes"}
	lb, err := c.CreateLoadBalancer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	err = c.DeleteBackendPool(ctx, p.ID)
	if !client.IsConflict(err) || !strings.Contains(err.Error(), lb.ID) {
		t.Fatalf("delete pool in use = %v, want 409 naming %s", err, lb.ID)
	}
	if err := c.DeleteLoadBalancer(ctx, lb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteBackendPool(ctx, p.ID); err != nil {
		t.Fatalf("delete unused pool: %v", err)
	}
	if _, err := c.GetBackendPool(ctx, p.ID); !client.IsNotFound(err) {
		t.Errorf("get deleted pool = %v, want 404", err)
	}
}

// TestBackendPoolTraffic: load balancers that name a pool send traffic to
// its members and probe them; one pool update moves every such load
// balancer to the new members.
func TestBackendPoolTraffic(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	ctx := context.Background()
	c := f.mc.Client
	p, err := c.CreateBackendPool(ctx, api.BackendPoolSpec{Name: "nodes", Tags: map[string]string{"k": "v"}, Targets: []api.Target{{InstanceID: f.a.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	var lbs []*api.LoadBalancer
	for i, port := range []int{18091, 18092} {
		lbs = append(lbs, f.create(t, api.LoadBalancerSpec{
			Name: "web" + string(rune('a'+i)), Listeners: []api.Listener{{Protocol: "TCP", Port: port, TargetPort: f.port}},
			Targets: []api.Target{}, BackendPools: []string{"nodes"},
		}))
	}
	for i, lb := range lbs {
		got := minicloudtest.CountTCP(t, vipAddr(lb, 18091+i), 4)
		if got["a"] != 4 {
			t.Fatalf("%s before the pool update: connections per backend %v, want all on a", lb.Name, got)
		}
		waitHealth(t, f.mc, lb.ID, f.a.PrivateIP, api.HealthHealthy)
	}
	if _, err := c.UpdateBackendPool(ctx, p.ID, api.BackendPoolSpec{Tags: p.Tags, Targets: []api.Target{{InstanceID: f.a.ID}, {InstanceID: f.b.ID}}}); err != nil {
		t.Fatal(err)
	}
	for i, lb := range lbs {
		got, err := c.GetLoadBalancer(ctx, lb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Targets) != 0 || len(got.TargetHealth) != 2 {
			t.Fatalf("%s after the pool update: targets %v, health %v; want no own targets and health of both members", lb.Name, got.Targets, got.TargetHealth)
		}
		waitHealth(t, f.mc, lb.ID, f.b.PrivateIP, api.HealthHealthy)
		if got := minicloudtest.CountTCP(t, vipAddr(lb, 18091+i), 6); got["a"] == 0 || got["b"] == 0 {
			t.Fatalf("%s after the pool update: connections per backend %v, want both used", lb.Name, got)
		}
	}
	// A stopped member is unhealthy in every load balancer naming its pool.
	if _, err := c.StopInstance(ctx, f.b.ID); err != nil {
		t.Fatal(err)
	}
	for _, lb := range lbs {
		waitHealth(t, f.mc, lb.ID, f.b.PrivateIP, api.HealthUnhealthy)
	}
	pools, err := c.ListBackendPools(ctx, client.ListOptions{Tags: map[string]string{"k": "v"}})
	if err != nil || len(pools) != 1 || len(pools[0].Targets) != 2 {
		t.Fatalf("list pools by tag = %v, %v; want the pool with two targets", pools, err)
	}
}
