package openstack_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
)

// TestRoutes, with and without extraroute-atomic: a route per node is an
// extra route of [Route] router-id via the node's InternalIP, plus an
// allowed address pair on its port; the listing costs the same few calls
// for any number of nodes; a route whose server is gone is a blackhole
// named by its next hop, and deleting it leaves the other routes.
func TestRoutes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hidden []string
		write  string
	}{
		{"atomic", nil, "PUT /network/v2.0/routers/{id}/add_extraroutes"},
		{"whole list", []string{"extraroute-atomic"}, "PUT /network/v2.0/routers/{id}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, mos.Options{HiddenExtensions: tc.hidden, MaxPageSize: 2})
			ctx := context.Background()
			nc := e.neutron(t)
			pages, err := routers.List(nc, routers.ListOpts{Name: "minicloud"}).AllPages(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rs, _ := routers.ExtractRouters(pages)
			if len(rs) != 1 {
				t.Fatalf("routers %+v", rs)
			}
			routerID := rs[0].ID
			p := newProvider(t, cloudConf(e.mc, "[Route]\nrouter-id = "+routerID+"\n"))
			r, ok := p.Routes()
			if !ok {
				t.Fatal("no routes with router-id set")
			}
			var ins []*api.Instance
			for i := range 4 {
				ins = append(ins, e.create(t, fmt.Sprintf("node-%d", i), "mc.small", minicloud.Zones[0], false))
			}
			for i, in := range ins {
				rt := &cloudprovider.Route{TargetNode: types.NodeName(in.Name), DestinationCIDR: fmt.Sprintf("10.244.%d.0/24", i),
					TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: in.PrivateIP}}}
				if i == 3 {
					rt.TargetNodeAddresses = nil // found through Nova by name
				}
				if err := r.CreateRoute(ctx, "kubernetes", "hint", rt); err != nil {
					t.Fatalf("CreateRoute %s: %v", in.Name, err)
				}
			}
			// Idempotent: a second create changes nothing.
			if err := r.CreateRoute(ctx, "kubernetes", "hint", &cloudprovider.Route{TargetNode: "node-0", DestinationCIDR: "10.244.0.0/24",
				TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ins[0].PrivateIP}}}); err != nil {
				t.Fatal(err)
			}
			if n := e.requests(t, tc.write); n < 4 {
				t.Errorf("%s called %d times, want at least 4", tc.write, n)
			}
			rt, err := routers.Get(ctx, nc, routerID).Extract()
			if err != nil {
				t.Fatal(err)
			}
			if len(rt.Routes) != 4 {
				t.Fatalf("router routes %+v, want 4", rt.Routes)
			}
			for i, in := range ins {
				want := routers.Route{DestinationCIDR: fmt.Sprintf("10.244.%d.0/24", i), NextHop: in.PrivateIP}
				if !slices.Contains(rt.Routes, want) {
					t.Errorf("router has no %+v: %+v", want, rt.Routes)
				}
				if pairs := portPairs(t, e, in); !slices.Contains(pairs, want.DestinationCIDR) {
					t.Errorf("port of %s has pairs %v, want %s", in.Name, pairs, want.DestinationCIDR)
				}
			}

			if err := e.mc.Client.ResetStats(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := r.ListRoutes(ctx, "kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			st, err := e.mc.Client.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var calls int64
			for _, n := range st.Requests {
				calls += n
			}
			// One router read and the servers in pages of 2 (4 servers:
			// 2 pages), plus the extensions read once.
			if calls > 4 {
				t.Errorf("ListRoutes made %d calls for 4 nodes: %v", calls, st.Requests)
			}
			names := map[string]string{}
			for _, g := range got {
				if g.Blackhole {
					t.Errorf("route %+v is a blackhole", g)
				}
				names[g.DestinationCIDR] = string(g.TargetNode)
			}
			for i, in := range ins {
				if names[fmt.Sprintf("10.244.%d.0/24", i)] != in.Name {
					t.Errorf("listing %v: want %s for 10.244.%d.0/24", names, in.Name, i)
				}
			}

			// node-1's server is deleted: its route is a blackhole named by
			// the next hop, and deleting it keeps the others.
			if err := e.mc.Client.DeleteInstance(ctx, ins[1].ID); err != nil {
				t.Fatal(err)
			}
			got, err = r.ListRoutes(ctx, "kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(got, func(g *cloudprovider.Route) bool { return g.DestinationCIDR == "10.244.1.0/24" })
			if i < 0 || !got[i].Blackhole || string(got[i].TargetNode) != ins[1].PrivateIP {
				t.Fatalf("route of the deleted server: %+v", got)
			}
			if err := r.DeleteRoute(ctx, "kubernetes", got[i]); err != nil {
				t.Fatal(err)
			}
			// node-2's route goes: the route and its pair.
			if err := r.DeleteRoute(ctx, "kubernetes", &cloudprovider.Route{Name: "10.244.2.0/24", TargetNode: "node-2", DestinationCIDR: "10.244.2.0/24",
				TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ins[2].PrivateIP}}}); err != nil {
				t.Fatal(err)
			}
			rt, err = routers.Get(ctx, nc, routerID).Extract()
			if err != nil {
				t.Fatal(err)
			}
			want := []routers.Route{{DestinationCIDR: "10.244.0.0/24", NextHop: ins[0].PrivateIP}, {DestinationCIDR: "10.244.3.0/24", NextHop: ins[3].PrivateIP}}
			if len(rt.Routes) != 2 || !slices.Contains(rt.Routes, want[0]) || !slices.Contains(rt.Routes, want[1]) {
				t.Errorf("routes after the deletes: %+v, want %+v", rt.Routes, want)
			}
			if pairs := portPairs(t, e, ins[2]); len(pairs) != 0 {
				t.Errorf("port of node-2 keeps pairs %v", pairs)
			}
		})
	}
}

// TestRoutesNeedExtraRoute: without [Route] router-id there are no routes.
func TestRoutesNeedRouterID(t *testing.T) {
	e := start(t, mos.Options{})
	if _, ok := e.p.Routes(); ok {
		t.Error("Routes() without router-id")
	}
}

// portPairs reads the allowed address pairs of an instance's port.
func portPairs(t *testing.T, e *env, in *api.Instance) []string {
	t.Helper()
	pages, err := ports.List(e.neutron(t), ports.ListOpts{DeviceID: in.ID}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ports.ExtractPorts(pages)
	if err != nil || len(ps) != 1 {
		t.Fatalf("ports of %s: %+v, %v", in.Name, ps, err)
	}
	var out []string
	for _, p := range ps[0].AllowedAddressPairs {
		out = append(out, p.IPAddress)
	}
	return out
}
