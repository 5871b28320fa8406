package minicloud

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// With the config key backendPools, the provider's load balancers target
// one shared minicloud backend pool per cluster instead of their own
// targets, and stratus sends node changes to the pool: one call whatever the
// number of load balancers. minicloud's load balancers and pools are
// regional, so one pool serves every zone; a cloud whose groups are zonal
// (GCE's instance groups) would key its pools by zone.

// poolKey is the key of the cluster's single backend pool.
const poolKey = "nodes"

var _ stratus.BackendPooler = (*Cloud)(nil)

// BackendPools returns the provider's backend pools when the config turns
// them on (backendPools: true).
func (c *Cloud) BackendPools() (stratus.BackendPools, bool) {
	if !c.lbs.pools {
		return nil, false
	}
	return c.lbs, true
}

// PoolName is the name of cluster clusterName's backend pool key.
func PoolName(clusterName, key string) string { return "k8s-" + clusterName + "-" + key }

// PoolsOf puts every backend node in the cluster's one pool. The pool is
// there with no nodes too, so that the key set, which the load balancers
// follow, stays the same.
func (l *loadBalancers) PoolsOf(nodes []*v1.Node) map[string][]*v1.Node {
	return map[string][]*v1.Node{poolKey: nodes}
}

// UsesBackendPools is true for every Service. An externalTrafficPolicy:
// Local Service's load balancer probes kube-proxy's health check node port
// on each member, with its own health check: the pool only lists the
// candidates, as its own targets did, and nodes without its endpoints are
// unhealthy in that load balancer alone.
func (l *loadBalancers) UsesBackendPools(*v1.Service) bool { return true }

// UpdateBackendPool makes the pool key have nodes' instances (and, with
// foreignNodes: internalIP, other nodes' addresses) as its members,
// creating it when it is missing.
func (l *loadBalancers) UpdateBackendPool(ctx context.Context, clusterName, key string, nodes []*v1.Node) error {
	if err := checkClusterName(clusterName); err != nil {
		return err
	}
	targets, err := l.targetsOf(ctx, nodes)
	if err != nil {
		return fmt.Errorf("update backend pool %s: %w", PoolName(clusterName, key), err)
	}
	return l.putPool(ctx, clusterName, PoolName(clusterName, key), targets, true)
}

// setTargets fills in what spec's load balancer serves for nodes: its own
// targets, or with backend pools the pools that hold them, which exist once
// it returns. When stratus keeps the pools' members
// (stratus.BackendPoolsManaged) an existing pool is left as it is; otherwise
// (an upstream manager) its members become nodes.
func (l *loadBalancers) setTargets(ctx context.Context, clusterName string, spec *api.LoadBalancerSpec, nodes []*v1.Node) error {
	if !l.pools {
		var err error
		spec.Targets, err = l.targetsOf(ctx, nodes)
		return err
	}
	managed := stratus.BackendPoolsManaged(ctx)
	name := PoolName(clusterName, poolKey)
	spec.Targets, spec.BackendPools = nil, []string{name}
	if _, known := l.poolIDs.get(name, clusterName); known && managed {
		return nil
	}
	targets, err := l.targetsOf(ctx, nodes)
	if err != nil {
		return err
	}
	return l.putPool(ctx, clusterName, name, targets, !managed)
}

// putPool makes backend pool name exist, with targets as its members when
// it is created or overwrite is set. An error means the pool may or may not
// have changed.
func (l *loadBalancers) putPool(ctx context.Context, clusterName, name string, targets []api.Target, overwrite bool) error {
	what := "backend pool " + name
	id, known := l.poolIDs.get(name, clusterName)
	if !known {
		found, err := l.findPool(ctx, clusterName, name)
		if err != nil {
			return err
		}
		if found != nil {
			id = found.ID
			if !overwrite {
				return nil
			}
		}
	}
	if id != "" {
		err := l.send(ctx, what, targets, func(targets []api.Target) error {
			_, err := l.api.UpdateBackendPool(ctx, id, api.BackendPoolSpec{Tags: poolTags(clusterName), Targets: targets})
			return err
		})
		if !client.IsNotFound(err) {
			return classify("update "+what, err)
		}
		l.poolIDs.forget(name) // deleted meanwhile: create it again
	}
	err := l.send(ctx, what, targets, func(targets []api.Target) error {
		p, err := l.api.CreateBackendPool(ctx, api.BackendPoolSpec{Name: name, Tags: poolTags(clusterName), Targets: targets})
		if err == nil {
			l.poolIDs.putID(name, p.ID, clusterName)
		}
		return err
	})
	if client.IsConflict(err) {
		// Created meanwhile (another load balancer's ensure): take it.
		found, ferr := l.findPool(ctx, clusterName, name)
		switch {
		case ferr != nil:
			return ferr
		case found == nil:
			return classify("create "+what, err)
		case overwrite:
			return l.putPool(ctx, clusterName, name, targets, true)
		}
		return nil
	}
	return classify("create "+what, err)
}

// findPool looks backend pool name up (nil when there is none), and
// remembers its ID. A pool of that name that another cluster tagged is an
// error.
func (l *loadBalancers) findPool(ctx context.Context, clusterName, name string) (*api.BackendPool, error) {
	page, err := l.api.ListBackendPoolsPage(ctx, client.ListOptions{Name: name})
	if err != nil {
		return nil, classify("find backend pool "+name, err)
	}
	if len(page.Items) == 0 {
		l.poolIDs.forget(name)
		return nil, nil
	}
	p := &page.Items[0]
	if owner := p.Tags[TagCluster]; owner != clusterName {
		return nil, fmt.Errorf("backend pool %s (%s) belongs to cluster %q, not %q", name, p.ID, owner, clusterName)
	}
	l.poolIDs.putID(name, p.ID, clusterName)
	return p, nil
}

func poolTags(clusterName string) map[string]string {
	return map[string]string{TagCluster: clusterName}
}
