package minicloud

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// routes implements cloudprovider.Routes with minicloud routes tagged with
// the cluster and the node.
type routes struct {
	api  *client.Client
	inst *instances
	// nodes, when set (by Initialize), finds a node's provider ID.
	nodes atomic.Pointer[kubernetes.Interface]
}

var _ cloudprovider.Routes = (*routes)(nil)

func (r *routes) setNodes(kc kubernetes.Interface) { r.nodes.Store(&kc) }

// ListRoutes lists the cluster's routes. TargetNode is the node the route
// was created for (its node tag), so a node whose instance has another name
// keeps its route; a route without the tag is attributed to its instance's
// name (instances are named like their nodes). A route whose instance is
// gone is a blackhole.
func (r *routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	rts, err := r.api.ListRoutes(ctx, client.ListOptions{Tags: map[string]string{TagCluster: clusterName}, PageSize: listPageSize})
	if err != nil {
		return nil, classify(fmt.Sprintf("list routes of cluster %q", clusterName), err)
	}
	var names map[string]string // provider ID -> instance name, listed when needed
	out := make([]*cloudprovider.Route, 0, len(rts))
	for _, rt := range rts {
		node := rt.Tags[TagNode]
		if node == "" {
			if names == nil {
				if names, err = r.instanceNames(ctx); err != nil {
					return nil, err
				}
			}
			node = names[ProviderID(rt.TargetInstanceID)]
		}
		out = append(out, &cloudprovider.Route{
			Name:            rt.ID,
			TargetNode:      types.NodeName(node),
			DestinationCIDR: rt.DestinationCIDR,
			Blackhole:       rt.State == api.RouteBlackhole,
		})
	}
	return out, nil
}

// instanceNames maps every instance's provider ID to its name.
func (r *routes) instanceNames(ctx context.Context) (map[string]string, error) {
	all, err := r.inst.ListInstances(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(all))
	for _, in := range all {
		names[in.Metadata.ProviderID] = in.Name
	}
	return names, nil
}

// CreateRoute routes route.DestinationCIDR to the target node's instance:
// the one its provider ID names, else the instance named like the node. A
// route that already sends the CIDR to that instance is success.
func (r *routes) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	node := string(route.TargetNode)
	what := fmt.Sprintf("create route %s to node %s", route.DestinationCIDR, node)
	if err := checkClusterName(clusterName); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	id, err := r.instanceOf(ctx, node)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	_, err = r.api.CreateRoute(ctx, api.RouteCreate{
		DestinationCIDR:  route.DestinationCIDR,
		TargetInstanceID: id,
		Tags:             map[string]string{TagCluster: clusterName, TagNode: node},
	})
	if client.IsConflict(err) {
		// Already routed: fine if to this instance (a retry whose answer was lost).
		if ok, lerr := r.routedTo(ctx, clusterName, route.DestinationCIDR, id); lerr != nil || ok {
			return lerr
		}
	}
	return classify(what, err)
}

// routedTo reports whether the cluster has a route of cidr to instance id.
func (r *routes) routedTo(ctx context.Context, clusterName, cidr, id string) (bool, error) {
	want, err := netip.ParsePrefix(cidr)
	if err != nil {
		return false, nil
	}
	rts, err := r.api.ListRoutes(ctx, client.ListOptions{Tags: map[string]string{TagCluster: clusterName}, PageSize: listPageSize})
	if err != nil {
		return false, classify(fmt.Sprintf("list routes of cluster %q", clusterName), err)
	}
	for _, rt := range rts {
		if p, err := netip.ParsePrefix(rt.DestinationCIDR); err == nil && p == want.Masked() && rt.TargetInstanceID == id {
			return true, nil
		}
	}
	return false, nil
}

// instanceOf returns the instance ID of the named node.
func (r *routes) instanceOf(ctx context.Context, node string) (string, error) {
	if kc := r.nodes.Load(); kc != nil {
		n, err := (*kc).CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil && n.Spec.ProviderID != "" {
			return InstanceIDOf(n.Spec.ProviderID)
		}
		if err != nil {
			klog.FromContext(ctx).V(4).Info("cannot read the node; finding its instance by name", "node", node, "err", err)
		}
	}
	inst, err := r.inst.byName(ctx, node)
	if err != nil {
		return "", err
	}
	return inst.ID, nil
}

// DeleteRoute deletes a route ListRoutes returned; one already gone is fine.
func (r *routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	if err := r.api.DeleteRoute(ctx, route.Name); err != nil && !client.IsNotFound(err) {
		return classify(fmt.Sprintf("delete route %s (%s to node %s)", route.Name, route.DestinationCIDR, route.TargetNode), err)
	}
	return nil
}
