package service

// Which nodes are load balancer backends: upstream's predicates (IsBackend),
// the test of a node change against them (backendChanged), joining nodes
// named by their provider's instance listing, and Controller.backends, which
// applies all of it to the node index for a sync or a backend pass.

import (
	"context"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	nodectl "github.com/stratus-ccm/stratus/internal/controller/node"
)

const (
	// LabelExcludeFromLB excludes a node from load balancer backends unless its
	// value parses as a boolean false.
	LabelExcludeFromLB = v1.LabelNodeExcludeBalancers
	// TaintToBeDeleted is the cluster autoscaler's taint on nodes it is removing;
	// such nodes are not load balancer backends.
	TaintToBeDeleted = "ToBeDeletedByClusterAutoscaler"
)

// IsBackend reports whether node is a load balancer backend (upstream's "stable
// node set" predicates): not being deleted, not excluded by label, not being
// removed by the cluster autoscaler. Readiness, cordoning and other taints do not
// matter; load balancer health checks handle those.
func IsBackend(node *v1.Node) bool {
	if node.DeletionTimestamp != nil {
		return false
	}
	if v, ok := node.Labels[LabelExcludeFromLB]; ok {
		if excluded, err := strconv.ParseBool(v); err != nil || excluded {
			return false
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == TaintToBeDeleted {
			return false
		}
	}
	return true
}

// backendChanged reports whether an update of a node can change any load
// balancer's backend set: its backend predicate result or the provider ID it
// is a backend under changed. listed gives a joining node's provider ID from
// the cached instance listing ("" when unknown; nil: none), as backends names
// it: the initialization of a node already named so changes nothing, and
// does not hold back a pass waiting for a burst of changes to pause.
func backendChanged(old, new *v1.Node, listed func(*v1.Node) string) bool {
	return IsBackend(old) != IsBackend(new) || backendID(old, listed) != backendID(new, listed)
}

// backendID is the provider ID node is a backend under: its own, or for a
// joining node the one listed gives it.
func backendID(node *v1.Node, listed func(*v1.Node) string) string {
	if listed != nil && joining(node) {
		return listed(node)
	}
	return node.Spec.ProviderID
}

// backends lists the cluster's load balancer backends from the informer cache.
// The nodes are shared with the cache: nobody may modify them (the cloud-provider
// contract already requires providers to treat them as read-only).
//
// A node whose machine the cloud layer knows to be gone is left out: the node
// lifecycle controller's guard may keep such a Node for minutes, and a machine
// that does not exist serves no traffic (clouds reject it as a target).
//
// A node that is not initialized yet is a backend at once, with the provider
// ID and addresses its provider's cached instance listing gives it. One the listing does
// not know, that joined less than NodeInitWait ago (joining), is left out
// while other backends exist (selectBackends): its initialization sets its
// provider ID, which triggers a backend update that names it. recheck is when
// the first such node's wait ends (0 when none was left out).
func (c *Controller) backends(ctx context.Context) (nodes []*v1.Node, recheck time.Duration, err error) {
	cached, err := c.nodes.list()
	if err != nil {
		return nil, 0, err
	}
	observed := make([]*v1.Node, 0, len(cached))
	for _, n := range cached {
		if !IsBackend(n) || c.knownGone(n) {
			continue
		}
		if joining(n) {
			// The instance listing the cloud layer holds (the node
			// controller lists to initialize it) may already know the
			// machine: then the node is a backend at once, under that ID.
			// Its addresses are then the listed ones, merged as its
			// initialization will merge them: a provider that targets
			// node addresses (OpenStack's pool members) would otherwise
			// leave it out, and the address patch that follows the
			// initialization changes no backend set, so nothing would
			// send it later.
			if id := c.listedProviderID(n); id != "" {
				named := *n // a shallow copy: the cached Node stays as it is
				named.Spec.ProviderID = id
				if addrs, changed, err := nodectl.DesiredAddresses(n, c.listedAddresses(n)); err == nil && changed {
					named.Status.Addresses = addrs // a new slice: the cached one is untouched
				}
				n = &named
			}
		}
		observed = append(observed, n)
	}
	nodes, recheck = selectBackends(c.opts.Clock.Now(), c.opts.NodeInitWait, observed)
	return nodes, recheck, nil
}

// listedProviderID is the provider ID that node's provider's cached instance
// listing gives it ("" when none does).
func (c *Controller) listedProviderID(node *v1.Node) string {
	if p := c.clouds.ForNode(node); p != nil {
		return p.ListedProviderID(node)
	}
	return ""
}

// listedAddresses are the addresses node's provider's cached instance listing
// reports for a node not initialized yet (nil when none does).
func (c *Controller) listedAddresses(node *v1.Node) []v1.NodeAddress {
	if p := c.clouds.ForNode(node); p != nil {
		return p.ListedAddresses(node)
	}
	return nil
}

// knownGone reports whether the provider that owns node knows its machine is
// gone (without asking the cloud).
func (c *Controller) knownGone(node *v1.Node) bool {
	p := c.clouds.ForNode(node)
	return p != nil && p.KnownGone(node)
}

// joining reports whether the node controller has yet to initialize node
// and the controller knows no provider ID for it: it has the uninitialized
// taint and no provider ID.
func joining(node *v1.Node) bool {
	return node.Spec.ProviderID == "" && slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool {
		return t.Key == cloudproviderapi.TaintExternalCloudProvider
	})
}
