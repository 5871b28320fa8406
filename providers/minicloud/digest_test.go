package minicloud

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// The digest the provider computes for a Service and nodes is the one
// minicloud lists once the load balancer targets those nodes, and differs
// from it otherwise; a node without a provider ID makes it unknown.
func TestBackendsDigestMatchesListing(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)
	f.ensure(t, cluster, svc, f.nodes)
	digester := f.lb.(stratus.BackendsDigester)
	listed := func() string {
		t.Helper()
		refs, err := f.lb.(stratus.LoadBalancerLister).ListLoadBalancers(ctx, cluster)
		if err != nil || len(refs) != 1 {
			t.Fatalf("ListLoadBalancers = %+v, %v; want one", refs, err)
		}
		if refs[0].Backends == "" {
			t.Fatalf("listed ref %+v carries no backends digest", refs[0])
		}
		return refs[0].Backends
	}
	both, ok := digester.BackendsDigest(ctx, cluster, svc, f.nodes)
	if !ok {
		t.Fatal("BackendsDigest of two named nodes: cannot tell; want a digest")
	}
	if got := listed(); got != both {
		t.Errorf("listed digest %s, want %s: the load balancer targets both nodes", got, both)
	}
	// The order of the nodes does not matter.
	if rev, _ := digester.BackendsDigest(ctx, cluster, svc, []*v1.Node{f.nodes[1], f.nodes[0]}); rev != both {
		t.Errorf("digest of the nodes reversed %s, want %s", rev, both)
	}
	one, ok := digester.BackendsDigest(ctx, cluster, svc, f.nodes[:1])
	if !ok || one == both {
		t.Fatalf("digest of one node = %q, %v; want one that differs from both nodes' %s", one, ok, both)
	}
	if err := f.lb.UpdateLoadBalancer(ctx, cluster, svc, f.nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != one {
		t.Errorf("listed digest after the update to one node %s, want %s", got, one)
	}
	unnamed := append([]*v1.Node{node("node-x", "")}, f.nodes...)
	if d, ok := digester.BackendsDigest(ctx, cluster, svc, unnamed); ok {
		t.Errorf("digest with a node without a provider ID = %q, true; want false (its instance needs a listing)", d)
	}
}

// With backend pools kept by stratus, a load balancer's digest is its
// pool's name, whatever the nodes: the pool's members are sent apart.
// Without the mark the update would set the pool's members, which the
// digest does not cover.
func TestBackendsDigestWithPools(t *testing.T) {
	ctx := context.Background()
	f := newLBFixtureConf(t, minicloudtest.BackendOptions{}, "backendPools: true\n")
	svc := f.service(8080)
	managed := stratus.WithBackendPoolsManaged(ctx)
	f.ensureCtx(t, managed, svc, f.nodes)
	digester := f.lb.(stratus.BackendsDigester)
	d, ok := digester.BackendsDigest(managed, cluster, svc, f.nodes)
	if !ok {
		t.Fatal("BackendsDigest with managed pools: cannot tell; want the pool's digest")
	}
	if other, _ := digester.BackendsDigest(managed, cluster, svc, f.nodes[:1]); other != d {
		t.Errorf("digest with managed pools depends on the nodes: %s and %s", d, other)
	}
	refs, err := f.lb.(stratus.LoadBalancerLister).ListLoadBalancers(ctx, cluster)
	if err != nil || len(refs) != 1 || refs[0].Backends != d {
		t.Errorf("ListLoadBalancers = %+v, %v; want one carrying %s", refs, err, d)
	}
	if d, ok := digester.BackendsDigest(ctx, cluster, svc, f.nodes); ok {
		t.Errorf("digest without the managed mark = %q, true; want false", d)
	}
}
