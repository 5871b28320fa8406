package service

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

func TestPlanPools(t *testing.T) {
	n := func(names ...string) []*v1.Node {
		var out []*v1.Node
		for _, name := range names {
			out = append(out, &v1.Node{Spec: v1.NodeSpec{ProviderID: "p://" + name}})
			out[len(out)-1].Name = name
		}
		return out
	}
	ref := func(p, k string) poolRef { return poolRef{p, k} }
	for _, tc := range []struct {
		name       string
		partitions map[string]map[string][]*v1.Node
		sent       map[poolRef]nodeSet
		hold       bool
		want       []string // provider/key:members
	}{
		{
			name:       "unknown pools are sent",
			partitions: map[string]map[string][]*v1.Node{"mc": {"a": n("n1"), "b": n("n2")}},
			want:       []string{"mc/a:1", "mc/b:1"},
		},
		{
			name:       "unchanged pools are not",
			partitions: map[string]map[string][]*v1.Node{"mc": {"a": n("n1", "n2")}},
			sent:       map[poolRef]nodeSet{ref("mc", "a"): newNodeSet(n("n2", "n1"))},
		},
		{
			name:       "a joined node",
			partitions: map[string]map[string][]*v1.Node{"mc": {"a": n("n1", "n2")}},
			sent:       map[poolRef]nodeSet{ref("mc", "a"): newNodeSet(n("n1"))},
			want:       []string{"mc/a:2"},
		},
		{
			name:       "additions held",
			partitions: map[string]map[string][]*v1.Node{"mc": {"a": n("n1", "n2")}},
			sent:       map[poolRef]nodeSet{ref("mc", "a"): newNodeSet(n("n1"))},
			hold:       true,
		},
		{
			name:       "removals are not held",
			partitions: map[string]map[string][]*v1.Node{"mc": {"a": n("n2")}},
			sent:       map[poolRef]nodeSet{ref("mc", "a"): newNodeSet(n("n1"))},
			hold:       true,
			want:       []string{"mc/a:1"},
		},
		{
			name:       "a pool whose last node left is emptied",
			partitions: map[string]map[string][]*v1.Node{"mc": {"a": n("n1")}},
			sent:       map[poolRef]nodeSet{ref("mc", "a"): newNodeSet(n("n1")), ref("mc", "b"): newNodeSet(n("n2")), ref("other", "x"): newNodeSet(n("n3"))},
			want:       []string{"mc/b:0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, u := range planPools(tc.partitions, tc.sent, tc.hold) {
				got = append(got, fmt.Sprintf("%s/%s:%d", u.ref.provider, u.ref.key, len(u.set)))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("planPools = %v, want %v", got, tc.want)
			}
		})
	}
	if poolKeysOf(nil) == "" || poolKeysOf(map[string][]*v1.Node{"a": nil}) == poolKeysOf(map[string][]*v1.Node{"b": nil}) {
		t.Error("poolKeysOf: no pools must differ from unknown, and different keys must differ")
	}
}

// With a provider that keeps backend pools, nodes joining reach every load
// balancer through one pool update, without an update of any load
// balancer; a failed pool update is retried, never taken for done.
func TestMinicloudBackendPools(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond})
	raw, err := mcprovider.New(&mcprovider.Config{URL: mc.URL, Token: mc.Token, ForeignNodes: mcprovider.ForeignNodesSkip,
		ClusterHealthCheck: mcprovider.ClusterHealthCheckNodePort, BackendPools: true})
	if err != nil {
		t.Fatal(err)
	}
	p := cloud.NewProvider(mcprovider.ProviderName, raw, cloud.WithBudget(cloud.BudgetConfig{MaxRetries: -1}))
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, cloud.Single(p), Options{ClusterName: "mc-pools-test"})
	addNode := func(i int) {
		inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: h.nodeName(i), Type: "mc.small", Zone: "mc-central-a"})
		if err != nil {
			t.Fatal(err)
		}
		h.createNodes(i, i+1, func(n *v1.Node) { n.Spec.ProviderID = mcprovider.ProviderID(inst.ID) })
	}
	addNode(0)
	addNode(1)
	names := []string{"web", "api", "db"}
	for _, name := range names {
		h.createService(lbService(name, func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }))
	}
	for _, name := range names {
		h.waitIngress(name, 30*time.Second)
	}
	pool := mcprovider.PoolName("mc-pools-test", "nodes")
	served := func(want int) func() (bool, error) {
		return func() (bool, error) {
			lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagCluster: "mc-pools-test"}})
			if err != nil || len(lbs) != len(names) {
				return false, nil
			}
			for _, lb := range lbs {
				if len(lb.Targets) != 0 || !slices.Equal(lb.BackendPools, []string{pool}) {
					return false, fmt.Errorf("load balancer %s: targets %v, pools %v; want only pool %s", lb.Name, lb.Targets, lb.BackendPools, pool)
				}
				if len(lb.TargetHealth) != want {
					return false, nil
				}
			}
			return true, nil
		}
	}
	h.eventually(30*time.Second, "every load balancer serving both nodes through the pool", served(2))

	if err := mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	addNode(2)
	addNode(3)
	h.eventually(30*time.Second, "every load balancer serving four nodes", served(4))
	stats, err := mc.Client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := stats.Requests["PUT /v1/load-balancers/{id}"]; n != 0 {
		t.Errorf("%d load balancer updates after nodes joined, want none (stats %v)", n, stats.Requests)
	}
	if n := stats.Requests["PUT /v1/backend-pools/{id}"]; n < 1 || n > 2 {
		t.Errorf("%d pool updates after two nodes joined, want one or two (stats %v)", n, stats.Requests)
	}

	// Every pool update fails: the node does not count as sent, and the
	// pool gets it once the cloud answers again.
	if _, err := mc.Client.SetFaults(ctx, api.Faults{ErrorRate: 1, Operations: []string{"PUT /v1/backend-pools/{id}"}}); err != nil {
		t.Fatal(err)
	}
	addNode(4)
	h.eventually(30*time.Second, "a failed pool update", func() (bool, error) {
		s, err := mc.Client.Stats(ctx)
		return err == nil && s.Errors >= 2, nil
	})
	if ok, err := served(4)(); !ok || err != nil {
		t.Fatalf("load balancers changed although every pool update failed: %v", err)
	}
	if _, err := mc.Client.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	h.eventually(60*time.Second, "every load balancer serving five nodes after the cloud recovered", served(5))
}
