package service

// Shared backend pools (stratus.BackendPools): what a backend pass sends to
// the pools of providers that use them, planned by planPools, and the key
// set a pooled load balancer targets (poolKeysOf).

import (
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// poolRef names one backend pool: its provider's configured name and the
// key the provider gave it.
type poolRef struct {
	provider, key string
}

// poolUpdate is one UpdateBackendPool a pass sends: the pool, its members
// and their set.
type poolUpdate struct {
	ref   poolRef
	nodes []*v1.Node
	set   nodeSet
}

// planPools decides, for the pools the providers' partitions of the
// backends give (provider name -> key -> members), which a pass sends: each
// pool whose members differ from the set last sent (sent; a pool missing
// from it is unknown and always sent), except that while additions are held
// (hold) a pool only losing nothing waits, as load balancers do
// (updatesBackends). A pool that was sent before and is missing from its
// provider's partition now (its last node left) is sent with no members.
// The answer is sorted by provider and key.
func planPools(partitions map[string]map[string][]*v1.Node, sent map[poolRef]nodeSet, hold bool) []poolUpdate {
	var out []poolUpdate
	for provider, partition := range partitions {
		for key, members := range partition {
			ref := poolRef{provider, key}
			set := newNodeSet(members)
			old, known := sent[ref]
			if known && (maps.Equal(old, set) || !updatesBackends(hold, old, set)) {
				continue
			}
			out = append(out, poolUpdate{ref: ref, nodes: members, set: set})
		}
	}
	for ref, old := range sent {
		partition, pooling := partitions[ref.provider]
		if _, current := partition[ref.key]; pooling && !current && len(old) > 0 {
			out = append(out, poolUpdate{ref: ref, set: nodeSet{}})
		}
	}
	slices.SortFunc(out, func(a, b poolUpdate) int {
		if c := strings.Compare(a.ref.provider, b.ref.provider); c != 0 {
			return c
		}
		return strings.Compare(a.ref.key, b.ref.key)
	})
	return out
}

// poolKeysOf is the key set of a partition as a load balancer records it:
// the sorted keys, joined, after a prefix that tells it from "" (no pools
// known: not pooled, or its last update failed). A pooled load balancer
// whose recorded keys are these targets every pool of the partition; one
// whose keys differ needs an UpdateLoadBalancer.
func poolKeysOf(partition map[string][]*v1.Node) string {
	return "pools:" + strings.Join(slices.Sorted(maps.Keys(partition)), "\x00")
}
