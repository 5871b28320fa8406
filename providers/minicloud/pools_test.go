package minicloud

import (
	"context"
	"net"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// TestBackendPools: with backendPools, load balancers target the cluster's
// shared pool; one pool update moves them all, without an update of any
// load balancer; an upstream manager's calls (no mark) set the members.
func TestBackendPools(t *testing.T) {
	f := newLBFixtureConf(t, minicloudtest.BackendOptions{}, "backendPools: true\n")
	if _, ok := f.cloud.BackendPools(); !ok {
		t.Fatal("BackendPools not offered with backendPools: true")
	}
	if _, ok := newLBFixture(t).cloud.BackendPools(); ok {
		t.Fatal("BackendPools offered without backendPools")
	}
	pools, _ := f.cloud.BackendPools()
	ctx := stratus.WithBackendPoolsManaged(context.Background())
	a, b := f.nodes[:1], f.nodes
	var addrs []string
	for i, port := range []int32{8080, 8081} {
		svc := f.service(port)
		svc.Name, svc.UID = svc.Name+string(rune('a'+i)), types.UID(string(rune('a'+i))+string(svc.UID[1:]))
		if i == 1 {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = f.healthPort
		}
		if !pools.UsesBackendPools(svc) {
			t.Fatalf("service %s does not use the pools", svc.Name)
		}
		st := f.ensureCtx(t, ctx, svc, a)
		addrs = append(addrs, net.JoinHostPort(st.Ingress[0].IP, strconv.Itoa(int(port))))
	}
	lbs, err := f.mc.Client.ListLoadBalancers(context.Background(), client.ListOptions{})
	if err != nil || len(lbs) != 2 {
		t.Fatalf("load balancers %v, %v; want two", lbs, err)
	}
	poolName := PoolName(cluster, "nodes")
	for _, lb := range lbs {
		if len(lb.Targets) != 0 || len(lb.BackendPools) != 1 || lb.BackendPools[0] != poolName {
			t.Fatalf("load balancer %s: targets %v, pools %v; want only pool %s", lb.Name, lb.Targets, lb.BackendPools, poolName)
		}
	}
	for _, addr := range addrs {
		waitBackends(t, addr, "node-a")
	}
	if err := f.mc.Client.ResetStats(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := pools.UpdateBackendPool(ctx, cluster, "nodes", b); err != nil {
		t.Fatal(err)
	}
	for _, addr := range addrs {
		waitBackends(t, addr, "node-a", "node-b")
	}
	stats, err := f.mc.Client.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := stats.Requests["PUT /v1/load-balancers/{id}"]; n != 0 || stats.Requests["PUT /v1/backend-pools/{id}"] != 1 {
		t.Errorf("requests after the pool update: %v; want one pool update and no load balancer update", stats.Requests)
	}
	// A managed ensure leaves the members to the passes.
	svc := f.service(8080)
	svc.Name, svc.UID = svc.Name+"a", types.UID("a"+string(svc.UID[1:]))
	f.ensureCtx(t, ctx, svc, a)
	if got := poolTargets(t, f.mc, poolName); len(got) != 2 {
		t.Errorf("pool after a managed ensure with one node: %v, want both nodes kept", got)
	}
	// An upstream manager's update sets them.
	if err := f.lb.UpdateLoadBalancer(context.Background(), cluster, svc, a); err != nil {
		t.Fatal(err)
	}
	if got := poolTargets(t, f.mc, poolName); len(got) != 1 || got[0].InstanceID != instanceIDs(a)[0] {
		t.Errorf("pool after an upstream update with node-a: %v", got)
	}
}

func poolTargets(t *testing.T, mc *minicloudtest.Cloud, name string) []api.Target {
	t.Helper()
	pools, err := mc.Client.ListBackendPools(context.Background(), client.ListOptions{Name: name})
	if err != nil || len(pools) != 1 {
		t.Fatalf("backend pool %s: %v, %v", name, pools, err)
	}
	return pools[0].Targets
}
