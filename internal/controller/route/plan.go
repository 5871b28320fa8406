package route

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	cloudprovider "k8s.io/cloud-provider"
)

// action is what a reconcile does for one pod CIDR of a node.
type action int

const (
	// actionAdd: no route for the CIDR exists; create one.
	actionAdd action = iota
	// actionKeep: the right route exists (or was just created).
	actionKeep
	// actionReplace: a route exists but the provider tracks node addresses
	// (EnableNodeAddresses) and they changed; delete it, then create it again.
	actionReplace
)

func (a action) String() string {
	return [...]string{"add", "keep", "replace"}[a]
}

// input is what a reconcile compares.
type input struct {
	// nodes are the nodes whose routes the routes provider programs.
	nodes []*v1.Node
	// foreign are the names of existing nodes the routes provider does not own: their
	// routes are never deleted and their conditions never written.
	foreign sets.Set[string]
	// routes are the routes ListRoutes returned.
	routes []*cloudprovider.Route
	// clusterCIDRs bound the routes the controller may delete.
	clusterCIDRs []netip.Prefix
}

// plan is the outcome of comparing nodes and routes, before any cloud call.
type plan struct {
	// deletes are the routes to delete: stale, blackhole, or to be replaced.
	deletes []*cloudprovider.Route
	// creates are the routes to create, after the deletes finished.
	creates []creation
	// nodes holds, for every node whose NetworkUnavailable condition the reconcile
	// writes, the action per pod CIDR. A node with routes but no pod CIDR has an
	// empty map.
	nodes map[string]map[string]action
	// unparsable are listed routes whose destination is not a CIDR; they are left
	// alone.
	unparsable []*cloudprovider.Route
}

// creation is one route to create.
type creation struct {
	node     *v1.Node
	nameHint string
	route    *cloudprovider.Route
}

// computePlan decides, per node and pod CIDR, whether the route is kept, added or
// replaced, and which listed routes are deleted. It follows upstream's route
// controller: a route is deleted when the controller is responsible for it (see
// responsible) and it is a blackhole route, targets no node, targets a node that no
// longer has its CIDR, or is being replaced.
func computePlan(in input) plan {
	byNode := map[string][]*cloudprovider.Route{}
	for _, r := range in.routes {
		if r.TargetNode != "" {
			byNode[string(r.TargetNode)] = append(byNode[string(r.TargetNode)], r)
		}
	}

	p := plan{nodes: map[string]map[string]action{}}
	for _, n := range in.nodes {
		_, hasRoutes := byNode[n.Name]
		if len(n.Spec.PodCIDRs) == 0 && !hasRoutes {
			continue // neither a CIDR nor a route: nothing to say about it
		}
		actions := map[string]action{}
		for _, cidr := range n.Spec.PodCIDRs {
			if _, seen := actions[cidr]; seen {
				continue
			}
			a := routeAction(byNode[n.Name], cidr, n.Status.Addresses)
			actions[cidr] = a
			if a != actionKeep {
				p.creates = append(p.creates, creation{
					node:     n,
					nameHint: string(n.UID),
					route: &cloudprovider.Route{
						TargetNode:          types.NodeName(n.Name),
						TargetNodeAddresses: n.Status.Addresses,
						DestinationCIDR:     cidr,
					},
				})
			}
		}
		p.nodes[n.Name] = actions
	}

	for _, r := range in.routes {
		ours, err := responsible(in.clusterCIDRs, r.DestinationCIDR)
		if err != nil {
			p.unparsable = append(p.unparsable, r)
			continue
		}
		if !ours {
			continue
		}
		if r.Blackhole {
			p.deletes = append(p.deletes, r)
			continue
		}
		if in.foreign.Has(string(r.TargetNode)) {
			continue
		}
		if a, ok := p.nodes[string(r.TargetNode)][r.DestinationCIDR]; !ok || a == actionReplace {
			p.deletes = append(p.deletes, r)
		}
	}
	return p
}

// routeAction decides what happens to cidr of a node, given the node's routes.
func routeAction(routes []*cloudprovider.Route, cidr string, addrs []v1.NodeAddress) action {
	for _, r := range routes {
		// A blackhole route is deleted (when in range) and does not count as
		// the node's route: it is created again right after the delete.
		if r.DestinationCIDR != cidr || r.Blackhole {
			continue
		}
		if !r.EnableNodeAddresses || sameAddresses(r.TargetNodeAddresses, addrs) {
			return actionKeep
		}
		return actionReplace
	}
	return actionAdd
}

// sameAddresses compares two address lists as sets, as upstream does: a route
// stays when only the order of the node's addresses changed.
func sameAddresses(a, b []v1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// networkUnavailable is the NetworkUnavailable status of a node after the
// reconcile: false only when every pod CIDR has its route.
func networkUnavailable(actions map[string]action) bool {
	if len(actions) == 0 {
		return true // routes but no pod CIDR
	}
	for _, a := range actions {
		if a != actionKeep {
			return true
		}
	}
	return false
}

// responsible reports whether the route with destination routeCIDR belongs to the
// cluster: its first or its last address lies inside one of the cluster CIDRs.
// Routes outside are never touched. An unparsable destination is an error.
func responsible(clusterCIDRs []netip.Prefix, routeCIDR string) (bool, error) {
	p, err := netip.ParsePrefix(routeCIDR)
	if err != nil {
		return false, err
	}
	p = p.Masked()
	first, last := p.Addr(), lastAddr(p)
	for _, c := range clusterCIDRs {
		if c.Contains(first) || c.Contains(last) {
			return true, nil
		}
	}
	return false, nil
}

// lastAddr returns the highest address of the masked prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		network := min(max(p.Bits()-8*i, 0), 8) // prefix bits inside byte i
		b[i] |= byte(0xff >> network)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
