package openstack_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/extraroutes"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

func TestNeutronTopology(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{MaxPageSize: 1})
	ctx := context.Background()
	a := e.createInstance(t, api.InstanceCreate{Name: "a", IPv6: true})
	b := e.createInstance(t, api.InstanceCreate{Name: "b"})
	if _, err := e.mc.Client.StopInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}

	// The external network, found the way the upstream provider looks.
	var nets []struct {
		networks.Network
		external.NetworkExternalExt
	}
	pages, err := networks.List(e.network, external.ListOptsExt{ListOptsBuilder: networks.ListOpts{}, External: ptr(true)}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := networks.ExtractNetworksInto(pages, &nets); err != nil || len(nets) != 1 || nets[0].Name != "public" || !nets[0].External {
		t.Fatalf("external networks: %+v, %v", nets, err)
	}
	pages, err = subnets.List(e.network, subnets.ListOpts{NetworkID: nets[0].ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subs, _ := subnets.ExtractSubnets(pages)
	if len(subs) != 1 || subs[0].CIDR != e.mc.Config.PublicCIDR.String() {
		t.Errorf("public subnets: %+v", subs)
	}

	// Ports: one per instance, found by device_id and by fixed IP.
	pages, err = ports.List(e.network, ports.ListOpts{DeviceID: a.ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := ports.ExtractPorts(pages)
	if len(ps) != 1 || ps[0].Status != "ACTIVE" || len(ps[0].FixedIPs) != 2 || ps[0].FixedIPs[0].IPAddress != a.PrivateIP {
		t.Fatalf("ports of a: %+v", ps)
	}
	pages, err = ports.List(e.network, ports.ListOpts{FixedIPs: []ports.FixedIPOpts{{IPAddress: b.PrivateIP}}, NetworkID: ps[0].NetworkID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := ports.ExtractPorts(pages)
	if len(pb) != 1 || pb[0].DeviceID != b.ID || pb[0].Status != "DOWN" {
		t.Errorf("port of b by fixed IP: %+v", pb)
	}
	pages, _ = ports.List(e.network, ports.ListOpts{DeviceID: "i-nothing"}).AllPages(ctx)
	if none, _ := ports.ExtractPorts(pages); len(none) != 0 {
		t.Errorf("device_id filter ignored: %d ports", len(none))
	}
	p, err := ports.Get(ctx, e.network, ps[0].ID).Extract()
	if err != nil || p.DeviceID != a.ID {
		t.Errorf("get port: %+v, %v", p, err)
	}
	_, err = ports.Get(ctx, e.network, "nope").Extract()
	wantStatus(t, err, http.StatusNotFound)

	// The security-group lookup the upstream provider makes on every sync.
	pages, err = groups.List(e.network, groups.ListOpts{Name: "lb-sg-x-default-web"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sgs, _ := groups.ExtractGroups(pages); len(sgs) != 0 {
		t.Errorf("security groups named lb-sg-...: %+v", sgs)
	}
	// Neutron's key is security_groups (the path is security-groups).
	tok := e.token(t)
	if status, _, body := e.raw(t, "GET", "/network/v2.0/security-groups", "", tok); status != 200 || len(body["security_groups"].([]any)) != 1 || body["security-groups"] != nil {
		t.Errorf("security groups: %d %v", status, body)
	}
	// The router's interface on the instances subnet has the subnet's
	// gateway address.
	_, _, body := e.raw(t, "GET", "/network/v2.0/subnets?name=instances", "", tok)
	gw := body["subnets"].([]any)[0].(map[string]any)["gateway_ip"]
	_, _, body = e.raw(t, "GET", "/network/v2.0/ports?device_owner=network:router_interface", "", tok)
	iface := body["ports"].([]any)[0].(map[string]any)["fixed_ips"].([]any)
	if gw == nil || len(iface) != 1 || iface[0].(map[string]any)["ip_address"] != gw {
		t.Errorf("router interface %v, instances subnet gateway %v", iface, gw)
	}

	exts, err := extensions.List(e.network).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := extensions.ExtractExtensions(exts)
	var aliases []string
	for _, x := range list {
		aliases = append(aliases, x.Alias)
	}
	if s := strings.Join(aliases, " "); !strings.Contains(s, "extraroute ") || !strings.Contains(s, "extraroute-atomic") {
		t.Errorf("extensions: %s", s)
	}

	// Bad filters, markers, IDs and bodies.
	tok = e.token(t)
	for path, want := range map[string]int{
		"/network/v2.0/ports?flavor=x":                       400,
		"/network/v2.0/ports?fixed_ips=mac=1":                400,
		"/network/v2.0/ports?marker=nope":                    404,
		"/network/v2.0/ports?limit=x":                        400,
		"/network/v2.0/ports?sort_key=name":                  400,
		"/network/v2.0/networks/nope":                        404,
		"/network/v2.0/routers?admin_state_up=true":          200,
		"/network/v2.0/routers?admin_state_up=maybe":         400,
		"/network/v2.0/nothing":                              404,
		"/network/v2.0/security-groups?name=default&limit=5": 200,
	} {
		status, _, body := e.raw(t, "GET", path, "", tok)
		if status != want || (want >= 400 && body["NeutronError"] == nil) {
			t.Errorf("GET %s: %d %v, want %d", path, status, body, want)
		}
	}
	status, hdr, _ := e.raw(t, "DELETE", "/network/v2.0/ports/"+ps[0].ID, "", tok)
	if status != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, PUT" {
		t.Errorf("DELETE port: %d Allow=%q", status, hdr.Get("Allow"))
	}
}

func ptr[T any](v T) *T { return &v }

// TestRouterExtraRoutes: extra routes are minicloud routes, both ways.
func TestRouterExtraRoutes(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{})
	ctx := context.Background()
	a := e.createInstance(t, api.InstanceCreate{Name: "a"})
	b := e.createInstance(t, api.InstanceCreate{Name: "b"})
	pages, err := routers.List(e.network, routers.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := routers.ExtractRouters(pages)
	if len(rs) != 1 {
		t.Fatalf("routers: %+v", rs)
	}
	id := rs[0].ID

	add := []routers.Route{{DestinationCIDR: "10.244.1.0/24", NextHop: a.PrivateIP}, {DestinationCIDR: "10.244.2.0/24", NextHop: b.PrivateIP}}
	r, err := extraroutes.Add(ctx, e.network, id, extraroutes.Opts{Routes: &add}).Extract()
	if err != nil || len(r.Routes) != 2 {
		t.Fatalf("add extra routes: %+v, %v", r, err)
	}
	native, err := e.mc.Client.ListRoutes(ctx, client.ListOptions{})
	if err != nil || len(native) != 2 || native[0].TargetInstanceID != a.ID || native[0].DestinationCIDR != "10.244.1.0/24" {
		t.Fatalf("minicloud routes: %+v, %v", native, err)
	}
	// Adding again is a no-op; an unknown next hop or a second next hop
	// for a destination is a 400 that changes nothing.
	if _, err := extraroutes.Add(ctx, e.network, id, extraroutes.Opts{Routes: &add}).Extract(); err != nil {
		t.Errorf("idempotent add: %v", err)
	}
	bad := []routers.Route{{DestinationCIDR: "10.244.3.0/24", NextHop: a.PrivateIP}, {DestinationCIDR: "10.244.4.0/24", NextHop: "192.0.2.1"}}
	_, err = extraroutes.Add(ctx, e.network, id, extraroutes.Opts{Routes: &bad}).Extract()
	wantStatus(t, err, http.StatusBadRequest)
	multi := []routers.Route{{DestinationCIDR: "10.244.1.0/24", NextHop: b.PrivateIP}}
	_, err = extraroutes.Add(ctx, e.network, id, extraroutes.Opts{Routes: &multi}).Extract()
	wantStatus(t, err, http.StatusBadRequest)
	if n, _ := e.mc.Client.ListRoutes(ctx, client.ListOptions{}); len(n) != 2 {
		t.Errorf("a rejected edit changed the routes: %+v", n)
	}

	// A route whose instance is gone keeps its next hop.
	if err := e.mc.Client.DeleteInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	got, err := routers.Get(ctx, e.network, id).Extract()
	if err != nil || len(got.Routes) != 2 || got.Routes[1].NextHop != b.PrivateIP {
		t.Errorf("routes after instance deletion: %+v, %v", got, err)
	}
	rm := add[1:]
	if r, err = extraroutes.Remove(ctx, e.network, id, extraroutes.Opts{Routes: &rm}).Extract(); err != nil || len(r.Routes) != 1 {
		t.Errorf("remove: %+v, %v", r, err)
	}
	// PUT replaces the whole list.
	only := []routers.Route{{DestinationCIDR: "10.244.9.0/24", NextHop: a.PrivateIP}}
	r, err = routers.Update(ctx, e.network, id, routers.UpdateOpts{Routes: &only}).Extract()
	if err != nil || len(r.Routes) != 1 || r.Routes[0].DestinationCIDR != "10.244.9.0/24" {
		t.Errorf("PUT routes: %+v, %v", r, err)
	}
	_, err = routers.Update(ctx, e.network, "nope", routers.UpdateOpts{Routes: &only}).Extract()
	wantStatus(t, err, http.StatusNotFound)
	// The router's interface gives the network the provider filters by.
	pages, _ = ports.List(e.network, ports.ListOpts{DeviceID: id}).AllPages(ctx)
	if rp, _ := ports.ExtractPorts(pages); len(rp) != 1 || rp[0].NetworkID == "" {
		t.Errorf("router ports: %+v", rp)
	}
}

// TestHiddenExtensions: a hidden extension is neither listed nor served,
// as on a Neutron without it; an unknown alias is refused at mount.
func TestHiddenExtensions(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{HiddenExtensions: []string{"extraroute-atomic", "allowed-address-pairs"}})
	ctx := context.Background()
	pages, err := extensions.List(e.network).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exts, _ := extensions.ExtractExtensions(pages)
	var aliases []string
	for _, x := range exts {
		aliases = append(aliases, x.Alias)
	}
	if slices.Contains(aliases, "extraroute-atomic") || slices.Contains(aliases, "allowed-address-pairs") || !slices.Contains(aliases, "extraroute") {
		t.Errorf("extensions %v", aliases)
	}
	_, err = extensions.Get(ctx, e.network, "extraroute-atomic").Extract()
	wantStatus(t, err, http.StatusNotFound)
	a := e.createInstance(t, api.InstanceCreate{Name: "a"})
	pages, _ = routers.List(e.network, routers.ListOpts{}).AllPages(ctx)
	rs, _ := routers.ExtractRouters(pages)
	add := []routers.Route{{DestinationCIDR: "10.244.1.0/24", NextHop: a.PrivateIP}}
	_, err = extraroutes.Add(ctx, e.network, rs[0].ID, extraroutes.Opts{Routes: &add}).Extract()
	wantStatus(t, err, http.StatusNotFound)
	if r, err := routers.Update(ctx, e.network, rs[0].ID, routers.UpdateOpts{Routes: &add}).Extract(); err != nil || len(r.Routes) != 1 {
		t.Errorf("whole-list update without extraroute-atomic: %+v, %v", r, err)
	}
	_, err = ports.Update(ctx, e.network, instancePort(t, e, a.ID).ID, ports.UpdateOpts{AllowedAddressPairs: &[]ports.AddressPair{{IPAddress: "10.244.1.0/24"}}}).Extract()
	wantStatus(t, err, http.StatusBadRequest)

	cfg := minicloud.DefaultConfig()
	cfg.StateDir, cfg.Tokens, cfg.NoDataPlane = t.TempDir(), []string{minicloudtest.RandomToken()}, true
	srv, err := minicloud.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := openstack.Mount(srv, openstack.Options{HiddenExtensions: []string{"warp-drive"}}); err == nil || !strings.Contains(err.Error(), "warp-drive") {
		t.Errorf("Mount with an unknown hidden extension: %v", err)
	}
}

func instancePort(t *testing.T, e *env, instanceID string) ports.Port {
	t.Helper()
	pages, err := ports.List(e.network, ports.ListOpts{DeviceID: instanceID}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := ports.ExtractPorts(pages)
	if len(ps) != 1 {
		t.Fatalf("ports of %s: %+v", instanceID, ps)
	}
	return ps[0]
}

// TestPortAddressPairs: an instance port's allowed_address_pairs are
// replaced by a PUT and read back (MAC defaulting to the port's); other
// attributes, other ports, bad addresses and duplicates are 400s.
func TestPortAddressPairs(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{})
	ctx := context.Background()
	a := e.createInstance(t, api.InstanceCreate{Name: "a"})
	p := instancePort(t, e, a.ID)
	pairs := []ports.AddressPair{{IPAddress: "10.244.1.7/24"}, {IPAddress: "10.0.0.9", MACAddress: "fa:16:3e:00:00:01"}}
	got, err := ports.Update(ctx, e.network, p.ID, ports.UpdateOpts{AllowedAddressPairs: &pairs}).Extract()
	want := []ports.AddressPair{{IPAddress: "10.244.1.0/24", MACAddress: p.MACAddress}, {IPAddress: "10.0.0.9", MACAddress: "fa:16:3e:00:00:01"}}
	if err != nil || !slices.Equal(got.AllowedAddressPairs, want) {
		t.Fatalf("update pairs: %+v, %v; want %+v", got, err, want)
	}
	if again := instancePort(t, e, a.ID); !slices.Equal(again.AllowedAddressPairs, want) {
		t.Errorf("pairs read back: %+v", again.AllowedAddressPairs)
	}
	for _, bad := range []string{
		`{"port": {"allowed_address_pairs": [{"ip_address": "nope"}]}}`,
		`{"port": {"allowed_address_pairs": [{"ip_address": "10.0.0.1"}, {"ip_address": "10.0.0.1"}]}}`,
		`{"port": {"name": "x"}}`,
		`{"port": {}}`,
	} {
		if status, _, _ := e.raw(t, "PUT", "/network/v2.0/ports/"+p.ID, bad, e.provider.Token()); status != http.StatusBadRequest {
			t.Errorf("PUT port %s: %d, want 400", bad, status)
		}
	}
	pages, _ := routers.List(e.network, routers.ListOpts{}).AllPages(ctx)
	rs, _ := routers.ExtractRouters(pages)
	pages, _ = ports.List(e.network, ports.ListOpts{DeviceID: rs[0].ID}).AllPages(ctx)
	rp, _ := ports.ExtractPorts(pages)
	_, err = ports.Update(ctx, e.network, rp[0].ID, ports.UpdateOpts{AllowedAddressPairs: &pairs}).Extract()
	wantStatus(t, err, http.StatusBadRequest)
	_, err = ports.Update(ctx, e.network, "nope", ports.UpdateOpts{AllowedAddressPairs: &pairs}).Extract()
	wantStatus(t, err, http.StatusNotFound)
}
