package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/extraroutes"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/portsecurity"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
)

// Neutron extensions the routes depend on, as upstream detects them.
const (
	extExtraRoute   = "extraroute"
	extAtomicRoutes = "extraroute-atomic"
	extAddressPairs = "allowed-address-pairs"
)

// routes implements cloudprovider.Routes as upstream does: the pod CIDR of
// each node is an extra route of [Route] router-id whose next hop is the
// node's InternalIP, and, where Neutron has allowed-address-pairs, an
// allowed address pair on the node's port so that port security lets the
// pods' traffic out.
type routes struct {
	c *Cloud
	// nodes, when set (by Initialize), maps next hops to node names with
	// one node listing; without it the Nova servers' names are used.
	nodes atomic.Pointer[kubernetes.Interface]

	// mu serializes the read-modify-write of the whole route list where
	// Neutron lacks extraroute-atomic, and guards the caches below.
	mu sync.Mutex
	// ext is Neutron's extension aliases, read once.
	ext map[string]bool
	// networks are the router's networks, where the nodes' ports are
	// looked up.
	networks []string
}

var _ cloudprovider.Routes = (*routes)(nil)

// extensions returns Neutron's extension aliases (cached once read).
func (r *routes) extensions(ctx context.Context, nc *gophercloud.ServiceClient) (map[string]bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ext != nil {
		return r.ext, nil
	}
	pages, err := extensions.List(nc).AllPages(ctx)
	if err != nil {
		return nil, classify("list Neutron extensions", err)
	}
	all, err := extensions.ExtractExtensions(pages)
	if err != nil {
		return nil, fmt.Errorf("list Neutron extensions: %w", err)
	}
	r.ext = map[string]bool{}
	for _, e := range all {
		r.ext[e.Alias] = true
	}
	return r.ext, nil
}

// prepare returns the network client and the extensions, failing when
// Neutron cannot hold extra routes.
func (r *routes) prepare(ctx context.Context) (*gophercloud.ServiceClient, map[string]bool, error) {
	nc, err := r.c.networkClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	ext, err := r.extensions(ctx, nc)
	if err != nil {
		return nil, nil, err
	}
	if !ext[extExtraRoute] {
		return nil, nil, fmt.Errorf("openstack: [Route] router-id is set but Neutron has no %q extension: routes cannot be managed", extExtraRoute)
	}
	return nc, ext, nil
}

func (r *routes) router(ctx context.Context, nc *gophercloud.ServiceClient) (*routers.Router, error) {
	rt, err := routers.Get(ctx, nc, r.c.cfg.RouterID).Extract()
	if isNotFound(err) {
		return nil, fmt.Errorf("openstack: [Route] router-id %s: no such router", r.c.cfg.RouterID)
	}
	if err != nil {
		return nil, classify("get router "+r.c.cfg.RouterID, err)
	}
	return rt, nil
}

// ListRoutes lists the router's extra routes: one router read and one
// listing of the nodes (or of the servers), whatever the number of nodes.
// A route whose next hop is no node's address is a blackhole, its
// TargetNode the next hop, as upstream.
func (r *routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	nc, _, err := r.prepare(ctx)
	if err != nil {
		return nil, err
	}
	rt, err := r.router(ctx, nc)
	if err != nil {
		return nil, err
	}
	out := make([]*cloudprovider.Route, 0, len(rt.Routes))
	if len(rt.Routes) == 0 {
		return out, nil
	}
	names, err := r.nodeNames(ctx)
	if err != nil {
		return nil, err
	}
	for _, item := range rt.Routes {
		name, ok := names[normalizeIP(item.NextHop)]
		if !ok {
			name = item.NextHop
		}
		out = append(out, &cloudprovider.Route{
			Name: item.DestinationCIDR, TargetNode: types.NodeName(name),
			DestinationCIDR: item.DestinationCIDR, Blackhole: !ok,
		})
	}
	return out, nil
}

func normalizeIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.String()
	}
	return s
}

// nodeNames maps every address of every node to the node's name: from one
// node listing with a Kubernetes client, else from one server listing
// (nodes named like their servers, as upstream finds them).
func (r *routes) nodeNames(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	if kc := r.nodes.Load(); kc != nil {
		nodes, err := (*kc).CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, fmt.Errorf("list nodes to name the routes' next hops: %w", err)
		}
		for _, n := range nodes.Items {
			for _, a := range n.Status.Addresses {
				out[normalizeIP(a.Address)] = n.Name
			}
		}
		return out, nil
	}
	all, err := r.c.listServers(ctx, listAll())
	if err != nil {
		return nil, err
	}
	for i := range all {
		for _, a := range r.c.addresses(&all[i]) {
			out[normalizeIP(a.Address)] = all[i].Name
		}
	}
	return out, nil
}

// nextHop is the node's InternalIP of the CIDR's family: from the route
// (the controller passes the node's addresses), else from its server.
func (r *routes) nextHop(ctx context.Context, route *cloudprovider.Route) (string, error) {
	dst, err := netip.ParsePrefix(route.DestinationCIDR)
	if err != nil {
		return "", fmt.Errorf("route to node %s: destination %q is not a CIDR", route.TargetNode, route.DestinationCIDR)
	}
	addrs := route.TargetNodeAddresses
	if len(addrs) == 0 {
		m, err := r.c.InstanceMetadata(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(route.TargetNode)}})
		if err != nil {
			return "", fmt.Errorf("route %s to node %s: %w", route.DestinationCIDR, route.TargetNode, err)
		}
		addrs = m.NodeAddresses
	}
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a.Address)
		if a.Type == v1.NodeInternalIP && err == nil && ip.Is4() == dst.Addr().Is4() {
			return ip.String(), nil
		}
	}
	return "", fmt.Errorf("route %s to node %s: the node has no InternalIP of that family", route.DestinationCIDR, route.TargetNode)
}

// CreateRoute adds the extra route (add_extraroutes with
// extraroute-atomic, else a whole-list update) and the allowed address
// pair on the node's port. When the pair cannot be written the route is
// taken back, so that a retry does both again.
func (r *routes) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	nc, ext, err := r.prepare(ctx)
	if err != nil {
		return err
	}
	hop, err := r.nextHop(ctx, route)
	if err != nil {
		return err
	}
	want := routers.Route{DestinationCIDR: route.DestinationCIDR, NextHop: hop}
	what := fmt.Sprintf("route %s via %s (node %s) on router %s", want.DestinationCIDR, hop, route.TargetNode, r.c.cfg.RouterID)
	added, err := r.edit(ctx, nc, ext, want, true)
	if err != nil {
		return fmt.Errorf("add %s: %w", what, err)
	}
	if !ext[extAddressPairs] {
		return nil
	}
	if err := r.pair(ctx, nc, hop, route.DestinationCIDR, true); err != nil {
		if added {
			if _, uerr := r.edit(ctx, nc, ext, want, false); uerr != nil {
				err = errors.Join(err, fmt.Errorf("take back %s: %w", what, uerr))
			}
		}
		return fmt.Errorf("add %s: %w", what, err)
	}
	return nil
}

// DeleteRoute removes the extra route and, unless it is a blackhole, the
// node port's allowed address pair.
func (r *routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	nc, ext, err := r.prepare(ctx)
	if err != nil {
		return err
	}
	hop := string(route.TargetNode)
	if !route.Blackhole {
		if hop, err = r.nextHop(ctx, route); err != nil {
			return err
		}
	}
	rm := routers.Route{DestinationCIDR: route.DestinationCIDR, NextHop: hop}
	what := fmt.Sprintf("route %s via %s (node %s) on router %s", rm.DestinationCIDR, hop, route.TargetNode, r.c.cfg.RouterID)
	if _, err := r.edit(ctx, nc, ext, rm, false); err != nil {
		return fmt.Errorf("delete %s: %w", what, err)
	}
	if route.Blackhole || !ext[extAddressPairs] {
		return nil
	}
	if err := r.pair(ctx, nc, hop, route.DestinationCIDR, false); err != nil {
		return fmt.Errorf("delete %s: %w", what, err)
	}
	return nil
}

// edit adds or removes one extra route and reports whether it changed
// anything (a route already there, or already gone, is success).
func (r *routes) edit(ctx context.Context, nc *gophercloud.ServiceClient, ext map[string]bool, rt routers.Route, add bool) (bool, error) {
	id := r.c.cfg.RouterID
	if ext[extAtomicRoutes] {
		opts := extraroutes.Opts{Routes: &[]routers.Route{rt}}
		var err error
		if add {
			_, err = extraroutes.Add(ctx, nc, id, opts).Extract()
		} else {
			_, err = extraroutes.Remove(ctx, nc, id, opts).Extract()
		}
		return err == nil, classify("update the extra routes", err)
	}
	// The whole list: one update at a time, so that two do not undo
	// each other.
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, err := r.router(ctx, nc)
	if err != nil {
		return false, err
	}
	list := slices.Clone(cur.Routes)
	i := slices.IndexFunc(list, func(x routers.Route) bool {
		return x.DestinationCIDR == rt.DestinationCIDR && normalizeIP(x.NextHop) == rt.NextHop
	})
	switch {
	case add && i >= 0, !add && i < 0:
		return false, nil
	case add:
		list = append(list, rt)
	default:
		list = slices.Delete(list, i, i+1)
	}
	_, err = routers.Update(ctx, nc, id, routers.UpdateOpts{Routes: &list}).Extract()
	return err == nil, classify("update the routes", err)
}

// portSecurity is a port with its port_security_enabled (gophercloud
// decodes each embedded struct on its own).
type portSecurity struct {
	ports.Port
	portsecurity.PortSecurityExt
}

// routerNetworks are the networks of the router's interfaces (cached).
func (r *routes) routerNetworks(ctx context.Context, nc *gophercloud.ServiceClient) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.networks != nil {
		return r.networks, nil
	}
	pages, err := ports.List(nc, ports.ListOpts{DeviceID: r.c.cfg.RouterID}).AllPages(ctx)
	if err != nil {
		return nil, classify("list the ports of router "+r.c.cfg.RouterID, err)
	}
	all, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, fmt.Errorf("list the ports of router %s: %w", r.c.cfg.RouterID, err)
	}
	nets := []string{}
	for _, p := range all {
		if p.NetworkID != "" && !slices.Contains(nets, p.NetworkID) {
			nets = append(nets, p.NetworkID)
		}
	}
	r.networks = nets
	return nets, nil
}

// pair adds or removes cidr in the allowed address pairs of the port that
// has ip on one of the router's networks. A port without port security
// needs none, as upstream.
func (r *routes) pair(ctx context.Context, nc *gophercloud.ServiceClient, ip, cidr string, add bool) error {
	nets, err := r.routerNetworks(ctx, nc)
	if err != nil {
		return err
	}
	var port *portSecurity
	for _, n := range nets {
		pages, err := ports.List(nc, ports.ListOpts{NetworkID: n, FixedIPs: []ports.FixedIPOpts{{IPAddress: ip}}}).AllPages(ctx)
		if err != nil {
			return classify(fmt.Sprintf("find the port of %s on network %s", ip, n), err)
		}
		var found []portSecurity
		if err := ports.ExtractPortsInto(pages, &found); err != nil {
			return fmt.Errorf("find the port of %s on network %s: %w", ip, n, err)
		}
		if len(found) == 1 {
			port = &found[0]
			break
		}
	}
	if port == nil {
		return fmt.Errorf("no port has %s on the networks of router %s", ip, r.c.cfg.RouterID)
	}
	if !port.PortSecurityEnabled {
		return nil
	}
	pairs := slices.Clone(port.AllowedAddressPairs)
	i := slices.IndexFunc(pairs, func(p ports.AddressPair) bool { return p.IPAddress == cidr })
	switch {
	case add && i >= 0, !add && i < 0:
		return nil
	case add:
		pairs = append(pairs, ports.AddressPair{IPAddress: cidr})
	default:
		pairs = slices.Delete(pairs, i, i+1)
	}
	_, err = ports.Update(ctx, nc, port.ID, ports.UpdateOpts{AllowedAddressPairs: &pairs}).Extract()
	return classify(fmt.Sprintf("update the allowed address pairs of port %s", port.ID), err)
}
