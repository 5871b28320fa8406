package conformance

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// backendPoolScenarios check stratus.BackendPools: load balancers follow
// their pools' updates, stratus's ensures leave the members alone, and the
// partition is a pure function of the nodes.
func backendPoolScenarios() []Scenario {
	needs := []Need{NeedLoadBalancer, NeedLoadBalancerDriver, NeedBackendPools}
	return []Scenario{
		{Name: "backendpools/partition", Needs: []Need{NeedLoadBalancer, NeedBackendPools}, Doc: "PoolsOf puts each node in at most one pool, names only nodes it was given, and answers the same for the same nodes.",
			run: func(ctx context.Context, e *env) error {
				nodes, _, err := e.nodes(ctx, 2)
				if err != nil {
					return err
				}
				first, again := e.pools.PoolsOf(nodes), e.pools.PoolsOf(slices.Clone(nodes))
				if !samePartition(first, again) {
					return expected("PoolsOf of the same nodes twice", partitionNames(first), partitionNames(again))
				}
				seen := map[string]string{}
				for key, members := range first {
					for _, n := range members {
						if !slices.Contains(nodes, n) {
							return fmt.Errorf("PoolsOf: pool %q has node %s, which it was not given", key, n.Name)
						}
						if other, dup := seen[n.Name]; dup {
							return fmt.Errorf("PoolsOf: node %s is in pools %q and %q", n.Name, other, key)
						}
						seen[n.Name] = key
					}
				}
				return nil
			}},
		{Name: "backendpools/update-reaches-load-balancers", Needs: needs, Doc: "After UpdateBackendPool of every pool, the load balancers that use the pools have the new nodes as backends, without an UpdateLoadBalancer.",
			run: func(ctx context.Context, e *env) error {
				nodes, _, err := e.nodes(ctx, 2)
				if err != nil {
					return err
				}
				svcs, err := e.pooledServices(ctx, 2, nodes[:1])
				if err != nil {
					return err
				}
				for _, set := range [][]*v1.Node{nodes, nodes[1:]} {
					if err := e.updatePools(ctx, set); err != nil {
						return err
					}
					for _, svc := range svcs {
						if err := e.wantBackends(ctx, svc, set); err != nil {
							return fmt.Errorf("after UpdateBackendPool with %d nodes: %w", len(set), err)
						}
					}
				}
				return nil
			}},
		{Name: "backendpools/managed-ensure-keeps-members", Needs: needs, Doc: "An EnsureLoadBalancer whose context carries BackendPoolsManaged does not change an existing pool's members.",
			run: func(ctx context.Context, e *env) error {
				nodes, _, err := e.nodes(ctx, 2)
				if err != nil {
					return err
				}
				svcs, err := e.pooledServices(ctx, 1, nodes)
				if err != nil {
					return err
				}
				if err := e.updatePools(ctx, nodes); err != nil {
					return err
				}
				if _, err := e.ensure(stratus.WithBackendPoolsManaged(ctx), e.cfg.ClusterName, svcs[0], nodes[:1]); err != nil {
					return err
				}
				return e.wantBackends(ctx, svcs[0], nodes)
			}},
	}
}

// pooledServices ensures n load balancers that use the backend pools, with
// nodes, as stratus ensures them (BackendPoolsManaged), after sending the
// pools nodes.
func (e *env) pooledServices(ctx context.Context, n int, nodes []*v1.Node) ([]*v1.Service, error) {
	if err := e.updatePools(ctx, nodes); err != nil {
		return nil, err
	}
	var out []*v1.Service
	for range n {
		svc := e.service()
		if !e.pools.UsesBackendPools(svc) {
			return nil, skip("UsesBackendPools is false for a plain Cluster-policy Service")
		}
		if _, err := e.ensure(stratus.WithBackendPoolsManaged(ctx), e.cfg.ClusterName, svc, nodes); err != nil {
			return nil, err
		}
		if err := e.wantBackends(ctx, svc, nodes); err != nil {
			return nil, err
		}
		out = append(out, svc)
	}
	return out, nil
}

// updatePools sends every pool of the partition of nodes its members.
func (e *env) updatePools(ctx context.Context, nodes []*v1.Node) error {
	for key, members := range e.pools.PoolsOf(nodes) {
		if err := e.pools.UpdateBackendPool(ctx, e.cfg.ClusterName, key, members); err != nil {
			return fmt.Errorf("UpdateBackendPool %q with %d nodes: expected success, got %w", key, len(members), err)
		}
	}
	return nil
}

func samePartition(a, b map[string][]*v1.Node) bool {
	return maps.EqualFunc(partitionNames(a), partitionNames(b), slices.Equal)
}

// partitionNames is a partition by node names, sorted.
func partitionNames(p map[string][]*v1.Node) map[string][]string {
	out := map[string][]string{}
	for key, members := range p {
		var names []string
		for _, n := range members {
			names = append(names, n.Name)
		}
		slices.Sort(names)
		out[key] = names
	}
	return out
}
