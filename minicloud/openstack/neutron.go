package openstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

var networkSvc = &service{prefix: NetworkPrefix, errorBody: networkError}

// networkError is Neutron's error body.
func networkError(status int, msg string) any {
	typ := map[int]string{400: "HTTPBadRequest", 404: "HTTPNotFound", 405: "HTTPMethodNotAllowed", 409: "HTTPConflict", 413: "HTTPRequestEntityTooLarge", 429: "HTTPTooManyRequests"}[status]
	if typ == "" {
		typ = "HTTPInternalServerError"
	}
	return map[string]any{"NeutronError": map[string]any{"type": typ, "message": msg, "detail": ""}}
}

// The synthesized network topology: network "minicloud" with the instance
// subnets and the VIP subnet, the external network "public" whose subnet
// is minicloud's public pool, and router "minicloud" between them whose
// extra routes are minicloud's routes.
func privateNetworkID() string   { return uuidOf("network", "minicloud") }
func publicNetworkID() string    { return uuidOf("network", "public") }
func instanceSubnetID() string   { return uuidOf("subnet", "instances") }
func instanceSubnetV6ID() string { return uuidOf("subnet", "instances-v6") }
func vipSubnetID() string        { return uuidOf("subnet", "vips") }
func publicSubnetID() string     { return uuidOf("subnet", "public") }
func routerID() string           { return uuidOf("router", "minicloud") }
func defaultSGID() string        { return uuidOf("security-group", "default") }

// nexthopTag records on a minicloud route the next hop it was created
// with, so a route whose instance is gone still shows it.
const nexthopTag = "openstack-nexthop"

// extension is a Neutron extension: its alias, name and description.
type extension struct{ alias, name, desc string }

// extensions are the Neutron extensions advertised (minus
// Options.HiddenExtensions).
var extensions = []extension{
	{"external-net", "Neutron external network", "Adds external network attribute to network resource."},
	{"router", "Neutron L3 Router", "Router abstraction for basic L3 forwarding between L2 Neutron networks and access to external networks via a NAT gateway."},
	{"extraroute", "Neutron Extra Route", "Extra routes configuration for L3 router"},
	{"extraroute-atomic", "Atomically add/remove extra routes", "Edit extra routes of a router on server side by atomically adding/removing extra routes"},
	{"security-group", "security-group", "The security groups extension."},
	{"allowed-address-pairs", "Allowed Address Pairs", "Provides allowed address pairs"},
	{"port-security", "Port Security", "Provides port security"},
}

// Extension aliases whose API the dialect serves only while listed.
const (
	extAtomicRoutes = "extraroute-atomic"
	extAddressPairs = "allowed-address-pairs"
)

// maxAddressPairs is Neutron's default max_allowed_address_pair.
const maxAddressPairs = 10

// hasExtension reports whether alias is listed (not hidden).
func (d *Dialect) hasExtension(alias string) bool {
	return !slices.Contains(d.opts.HiddenExtensions, alias)
}

// listedExtensions are the extensions listed.
func (d *Dialect) listedExtensions() []extension {
	return slices.DeleteFunc(slices.Clone(extensions), func(e extension) bool { return !d.hasExtension(e.alias) })
}

func (d *Dialect) neutronRoutes() {
	d.handle(networkSvc, "GET /network/{$}", true, func(r *request) (int, any, error) {
		return http.StatusOK, map[string]any{"versions": []any{map[string]any{
			"id": "v2.0", "status": "CURRENT", "links": []link{{Href: r.base + NetworkPrefix + "/v2.0/", Rel: "self"}},
		}}}, nil
	})
	b := "/network/v2.0/"
	coll := func(name, singular string, sp special, build func(r *request) ([]object, error)) {
		d.handle(networkSvc, "GET "+b+name, false, d.neutronList(name, sp, build))
		d.handle(networkSvc, "GET "+b+name+"/{id}", false, d.neutronGet(singular, build))
	}
	coll("networks", "network", nil, d.networkObjects)
	coll("subnets", "subnet", nil, d.subnetObjects)
	coll("ports", "port", special{"fixed_ips": fixedIPsFilter}, d.portObjects)
	coll("floatingips", "floatingip", nil, d.floatingIPObjects)
	coll("security-groups", "security_group", nil, d.securityGroupObjects)
	coll("security-group-rules", "security_group_rule", nil, d.securityGroupRuleObjects)
	coll("routers", "router", nil, d.routerObjects)
	d.handle(networkSvc, "GET "+b+"extensions", false, func(r *request) (int, any, error) {
		if len(r.URL.Query()) > 0 {
			return 0, nil, badRequest("unexpected query parameters")
		}
		var out []any
		for _, e := range d.listedExtensions() {
			out = append(out, extensionBody(e.alias, e.name, e.desc))
		}
		return http.StatusOK, map[string]any{"extensions": out}, nil
	})
	d.handle(networkSvc, "GET "+b+"extensions/{alias}", false, func(r *request) (int, any, error) {
		for _, e := range d.listedExtensions() {
			if e.alias == r.PathValue("alias") {
				return http.StatusOK, map[string]any{"extension": extensionBody(e.alias, e.name, e.desc)}, nil
			}
		}
		return 0, nil, notFound("Extension with alias %s does not exist", r.PathValue("alias"))
	})
	d.handle(networkSvc, "POST "+b+"floatingips", false, d.createFloatingIP)
	d.handle(networkSvc, "PUT "+b+"floatingips/{id}", false, d.updateFloatingIP)
	d.handle(networkSvc, "DELETE "+b+"floatingips/{id}", false, d.deleteFloatingIP)
	d.handle(networkSvc, "PUT "+b+"ports/{id}", false, d.updatePort)
	d.handle(networkSvc, "PUT "+b+"routers/{id}", false, d.updateRouter)
	d.handle(networkSvc, "PUT "+b+"routers/{id}/add_extraroutes", false, d.editRoutes(true))
	d.handle(networkSvc, "PUT "+b+"routers/{id}/remove_extraroutes", false, d.editRoutes(false))
}

func extensionBody(alias, name, desc string) map[string]any {
	return map[string]any{"alias": alias, "name": name, "description": desc, "updated": "2013-01-20T00:00:00-00:00", "links": []any{}}
}

func neutronAttrErr(k string) error { return badRequest("[%s] is invalid attribute for filtering", k) }

func (d *Dialect) neutronList(coll string, sp special, build func(r *request) ([]object, error)) handler {
	return func(r *request) (int, any, error) {
		q := r.URL.Query()
		p, err := d.parsePage(q)
		if err != nil {
			return 0, nil, err
		}
		all, err := build(r)
		if err != nil {
			return 0, nil, err
		}
		return listAnswer(r, coll, all, q, sp, p, neutronAttrErr, func(m string) error {
			return notFound("Marker %s could not be found in %s.", m, coll)
		})
	}
}

func (d *Dialect) neutronGet(singular string, build func(r *request) ([]object, error)) handler {
	return func(r *request) (int, any, error) {
		q := r.URL.Query()
		for k := range q {
			if k != "fields" {
				return 0, nil, badRequest("[%s] is not a parameter of a get; only fields is", k)
			}
		}
		all, err := build(r)
		if err != nil {
			return 0, nil, err
		}
		id := r.PathValue("id")
		for _, o := range all {
			if o["id"] == id {
				sel, err := filterObjects([]object{o}, q, nil, neutronAttrErr)
				if err != nil {
					return 0, nil, err
				}
				return http.StatusOK, map[string]any{singular: sel[0]}, nil
			}
		}
		name := strings.ReplaceAll(singular, "_", " ")
		return 0, nil, notFound("%s %s could not be found.", strings.ToUpper(name[:1])+name[1:], id)
	}
}

// fixedIPsFilter matches ports by fixed_ips=ip_address=X and
// fixed_ips=subnet_id=Y (each value one condition, all must hold).
func fixedIPsFilter(o object, vals []string) (bool, error) {
	ips, _ := o["fixed_ips"].([]any)
	for _, v := range vals {
		key, want, ok := strings.Cut(v, "=")
		if !ok || (key != "ip_address" && key != "subnet_id" && key != "ip_address_substr") {
			return false, badRequest("fixed_ips filter %q: want ip_address=, ip_address_substr= or subnet_id=", v)
		}
		found := false
		for _, ip := range ips {
			m, _ := ip.(map[string]any)
			got := fmt.Sprint(m[strings.TrimSuffix(key, "_substr")])
			if (key == "ip_address_substr" && strings.Contains(got, want)) || got == want {
				found = true
			}
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}

func common(id, name string, created time.Time) map[string]any {
	return map[string]any{
		"id": id, "name": name, "tenant_id": projectID(), "project_id": projectID(), "description": "",
		"tags": []string{}, "created_at": created.UTC().Format(time.RFC3339), "updated_at": created.UTC().Format(time.RFC3339),
		"revision_number": 1,
	}
}

func with(m map[string]any, kv map[string]any) map[string]any {
	for k, v := range kv {
		m[k] = v
	}
	return m
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (d *Dialect) networkObjects(r *request) ([]object, error) {
	net := func(id, name string, external bool, subnets []string) object {
		return toObject(with(common(id, name, epoch), map[string]any{
			"status": "ACTIVE", "admin_state_up": true, "shared": false, "router:external": external,
			"subnets": subnets, "mtu": 1500, "port_security_enabled": true, "availability_zones": []string{},
		}))
	}
	return []object{
		net(privateNetworkID(), privateNetworkName, false, []string{instanceSubnetID(), instanceSubnetV6ID(), vipSubnetID()}),
		net(publicNetworkID(), "public", true, []string{publicSubnetID()}),
	}, nil
}

func (d *Dialect) subnetObjects(r *request) ([]object, error) {
	cfg := d.srv.Config()
	sub := func(id, name, network string, cidr netip.Prefix, gateway any) object {
		version := 4
		if cidr.Addr().Is6() {
			version = 6
		}
		end := lastAddr(cidr).Prev()
		if gateway != nil {
			end = end.Prev()
		}
		return toObject(with(common(id, name, epoch), map[string]any{
			"network_id": network, "cidr": cidr.Masked().String(), "ip_version": version, "gateway_ip": gateway,
			"enable_dhcp": true, "dns_nameservers": []string{}, "host_routes": []any{},
			"allocation_pools":  []map[string]string{{"start": cidr.Masked().Addr().Next().String(), "end": end.String()}},
			"ipv6_address_mode": nil, "ipv6_ra_mode": nil, "subnetpool_id": nil,
		}))
	}
	return []object{
		sub(instanceSubnetID(), "instances", privateNetworkID(), cfg.InstanceCIDR, routerInterfaceIP(cfg.InstanceCIDR).String()),
		sub(instanceSubnetV6ID(), "instances-v6", privateNetworkID(), minicloud.InstanceIPv6CIDR(), nil),
		sub(vipSubnetID(), "vips", privateNetworkID(), cfg.VIPCIDR, nil),
		sub(publicSubnetID(), "public", publicNetworkID(), cfg.PublicCIDR, nil),
	}, nil
}

// routerInterfaceIP is the address of router minicloud's interface on the
// instances subnet, its gateway: the subnet's last usable address.
// minicloud does not reserve it (an instance could be given it once the
// rest of the subnet is taken); it is shown, never used.
func routerInterfaceIP(instances netip.Prefix) netip.Addr { return lastAddr(instances).Prev() }

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().AsSlice()
	for i := range a {
		for j := 0; j < 8; j++ {
			if i*8+j >= p.Bits() {
				a[i] |= 1 << (7 - j)
			}
		}
	}
	out, _ := netip.AddrFromSlice(a)
	return out
}

func portObject(id, name, network, mac, status, deviceID, owner string, fixed []map[string]string, sgs []string, pairs []addressPair, created time.Time) object {
	if pairs == nil {
		pairs = []addressPair{}
	}
	return toObject(with(common(id, name, created), map[string]any{
		"network_id": network, "mac_address": mac, "admin_state_up": true, "status": status,
		"device_id": deviceID, "device_owner": owner, "fixed_ips": fixed, "allowed_address_pairs": pairs,
		"security_groups": sgs, "port_security_enabled": true, "binding:vnic_type": "normal", "extra_dhcp_opts": []any{},
	}))
}

func instancePortID(instanceID string) string { return uuidOf("port", instanceID) }

// portObjects are one port per instance (ACTIVE while it runs, DOWN when
// stopped), the VIP port of every Octavia load balancer and the router's
// interface.
func (d *Dialect) portObjects(r *request) ([]object, error) {
	insts, err := r.mc.ListInstances(r.Context(), client.ListOptions{})
	if err != nil {
		return nil, err
	}
	lbs, err := d.loadLBs(r)
	if err != nil {
		return nil, err
	}
	pairs, err := d.portRecords()
	if err != nil {
		return nil, err
	}
	var out []object
	for _, in := range insts {
		fixed := []map[string]string{{"subnet_id": instanceSubnetID(), "ip_address": in.PrivateIP}}
		if in.PrivateIPv6 != "" {
			fixed = append(fixed, map[string]string{"subnet_id": instanceSubnetV6ID(), "ip_address": in.PrivateIPv6})
		}
		status := "ACTIVE"
		if in.State != api.InstanceRunning {
			status = "DOWN"
		}
		out = append(out, portObject(instancePortID(in.ID), "", privateNetworkID(), macOf(in.ID), status, in.ID, "compute:"+in.Zone, fixed, []string{defaultSGID()}, pairs[instancePortID(in.ID)], in.CreatedAt))
	}
	for _, lb := range lbs {
		fixed := []map[string]string{{"subnet_id": vipSubnetID(), "ip_address": lb.VIPAddress}}
		out = append(out, portObject(vipPortID(lb.ID), "octavia-lb-"+lb.ID, privateNetworkID(), macOf(lb.ID), "ACTIVE", "lb-"+lb.ID, "Octavia", fixed, []string{}, nil, lb.CreatedAt))
	}
	iface := []map[string]string{{"subnet_id": instanceSubnetID(), "ip_address": routerInterfaceIP(d.srv.Config().InstanceCIDR).String()}}
	out = append(out, portObject(uuidOf("port", "router"), "", privateNetworkID(), macOf("router"), "ACTIVE", routerID(), "network:router_interface", iface, []string{}, nil, epoch))
	return out, nil
}

// defaultSGRules are the rules of security group default: any traffic out
// (the data plane filters nothing by security group).
func defaultSGRules() []map[string]any {
	rule := func(dir, eth string) map[string]any {
		r := with(common(uuidOf("sg-rule", dir+eth), "", epoch), map[string]any{
			"direction": dir, "ethertype": eth, "security_group_id": defaultSGID(), "protocol": nil,
			"port_range_min": nil, "port_range_max": nil, "remote_ip_prefix": nil, "remote_group_id": nil,
			"remote_address_group_id": nil, "normalized_cidr": nil, "belongs_to_default_sg": true,
		})
		// Rules have no name in Neutron.
		delete(r, "name")
		return r
	}
	return []map[string]any{rule("egress", "IPv4"), rule("egress", "IPv6")}
}

func (d *Dialect) securityGroupObjects(r *request) ([]object, error) {
	return []object{toObject(with(common(defaultSGID(), "default", epoch), map[string]any{
		"description": "Default security group", "stateful": true,
		"security_group_rules": defaultSGRules(),
	}))}, nil
}

func (d *Dialect) securityGroupRuleObjects(r *request) ([]object, error) {
	var out []object
	for _, rule := range defaultSGRules() {
		out = append(out, toObject(rule))
	}
	return out, nil
}

// ---- routers

type route struct {
	Destination string `json:"destination"`
	NextHop     string `json:"nexthop"`
}

// routerRoutes lists minicloud's routes as extra routes: the next hop is
// the target instance's private IP (or the one the route was made with,
// once the instance is gone).
func (d *Dialect) routerRoutes(r *request) ([]route, []api.Route, error) {
	rts, err := r.mc.ListRoutes(r.Context(), client.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	insts, err := r.mc.ListInstances(r.Context(), client.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	ipOf := map[string]string{}
	for _, in := range insts {
		ipOf[in.ID] = in.PrivateIP
	}
	var out []route
	var kept []api.Route
	for _, rt := range rts {
		hop := ipOf[rt.TargetInstanceID]
		if hop == "" {
			hop = rt.Tags[nexthopTag]
		}
		if hop == "" {
			continue
		}
		out = append(out, route{Destination: rt.DestinationCIDR, NextHop: hop})
		kept = append(kept, rt)
	}
	return out, kept, nil
}

func (d *Dialect) routerObject(r *request) (object, error) {
	routes, _, err := d.routerRoutes(r)
	if err != nil {
		return nil, err
	}
	if routes == nil {
		routes = []route{}
	}
	return toObject(with(common(routerID(), "minicloud", epoch), map[string]any{
		"status": "ACTIVE", "admin_state_up": true, "distributed": false, "ha": false, "routes": routes,
		"external_gateway_info": map[string]any{"network_id": publicNetworkID(), "enable_snat": true, "external_fixed_ips": []any{}},
		"availability_zones":    []string{}, "availability_zone_hints": []string{}, "flavor_id": nil,
	})), nil
}

func (d *Dialect) routerObjects(r *request) ([]object, error) {
	o, err := d.routerObject(r)
	if err != nil {
		return nil, err
	}
	return []object{o}, nil
}

type routesBody struct {
	Router struct {
		Routes *[]route `json:"routes"`
	} `json:"router"`
}

func (d *Dialect) readRoutes(r *request) ([]route, error) {
	if r.PathValue("id") != routerID() {
		return nil, notFound("Router %s could not be found", r.PathValue("id"))
	}
	var in routesBody
	if err := decodeBody(r, &in); err != nil {
		return nil, err
	}
	if in.Router.Routes == nil {
		return nil, badRequest("router.routes: minicloud updates the routes of a router only")
	}
	out := *in.Router.Routes
	for i, rt := range out {
		p, err := netip.ParsePrefix(rt.Destination)
		if err != nil {
			return nil, badRequest("Invalid input for routes: destination %q is not a CIDR", rt.Destination)
		}
		if _, err := netip.ParseAddr(rt.NextHop); err != nil {
			return nil, badRequest("Invalid input for routes: nexthop %q is not an IP address", rt.NextHop)
		}
		out[i].Destination = p.Masked().String()
	}
	return out, nil
}

// updateRouter answers PUT /routers/{id} {"router": {"routes": [...]}}:
// the extra routes become the list.
func (d *Dialect) updateRouter(r *request) (int, any, error) {
	want, err := d.readRoutes(r)
	if err != nil {
		return 0, nil, err
	}
	if err := d.setRoutes(r, want, nil); err != nil {
		return 0, nil, err
	}
	o, err := d.routerObject(r)
	return http.StatusOK, map[string]any{"router": o}, err
}

// editRoutes answers add_extraroutes and remove_extraroutes (atomic, and
// idempotent like Neutron's); 404 while extraroute-atomic is hidden, as
// Neutron answers a path no extension serves.
func (d *Dialect) editRoutes(add bool) handler {
	return func(r *request) (int, any, error) {
		if !d.hasExtension(extAtomicRoutes) {
			return 0, nil, notFound("The resource could not be found.")
		}
		edit, err := d.readRoutes(r)
		if err != nil {
			return 0, nil, err
		}
		if err := d.setRoutes(r, nil, &routeEdit{add: add, routes: edit}); err != nil {
			return 0, nil, err
		}
		o, err := d.routerObject(r)
		return http.StatusOK, map[string]any{"router": o}, err
	}
}

type routeEdit struct {
	add    bool
	routes []route
}

// setRoutes makes minicloud's routes the list want (or the current list
// edited): a next hop must be an instance's private IP, and a destination
// goes to one instance (minicloud has no multipath routes). It checks
// everything before it changes anything.
func (d *Dialect) setRoutes(r *request, want []route, edit *routeEdit) error {
	d.octMu.Lock()
	defer d.octMu.Unlock()
	cur, native, err := d.routerRoutes(r)
	if err != nil {
		return err
	}
	if edit != nil {
		want = slices.Clone(cur)
		for _, e := range edit.routes {
			i := slices.Index(want, e)
			switch {
			case edit.add && i < 0:
				want = append(want, e)
			case !edit.add && i >= 0:
				want = slices.Delete(want, i, i+1)
			}
		}
	}
	insts, err := r.mc.ListInstances(r.Context(), client.ListOptions{})
	if err != nil {
		return err
	}
	byIP := map[string]string{}
	for _, in := range insts {
		byIP[in.PrivateIP] = in.ID
		if in.PrivateIPv6 != "" {
			byIP[in.PrivateIPv6] = in.ID
		}
	}
	dest := map[string]string{}
	for _, w := range want {
		if o, ok := dest[w.Destination]; ok && o != w.NextHop {
			return badRequest("Invalid input for routes: destination %s has next hops %s and %s; minicloud routes a destination to one instance", w.Destination, o, w.NextHop)
		}
		dest[w.Destination] = w.NextHop
		if !slices.Contains(cur, w) && byIP[w.NextHop] == "" {
			return badRequest("Invalid input for routes: the nexthop %s is not connected with router (no instance has it)", w.NextHop)
		}
	}
	for i, c := range cur {
		if !slices.Contains(want, c) {
			if err := r.mc.DeleteRoute(r.Context(), native[i].ID); err != nil && !isNotFound(err) {
				return fmt.Errorf("delete minicloud route %s: %w", native[i].ID, err)
			}
		}
	}
	for _, w := range want {
		if slices.Contains(cur, w) {
			continue
		}
		_, err := r.mc.CreateRoute(r.Context(), api.RouteCreate{DestinationCIDR: w.Destination, TargetInstanceID: byIP[w.NextHop], Tags: map[string]string{nexthopTag: w.NextHop}})
		if err != nil {
			return fmt.Errorf("create minicloud route %s via %s: %w", w.Destination, w.NextHop, err)
		}
	}
	return nil
}

// ---- ports

// addressPair is an entry of a port's allowed_address_pairs.
type addressPair struct {
	IPAddress  string `json:"ip_address"`
	MACAddress string `json:"mac_address"`
}

// portRecord is what the dialect stores of a port: its allowed address
// pairs (instance ports are otherwise synthesized from instances).
type portRecord struct {
	ID    string        `json:"id"`
	Pairs []addressPair `json:"pairs"`
}

// portRecords returns the stored address pairs by port ID.
func (d *Dialect) portRecords() (map[string][]addressPair, error) {
	var recs []portRecord
	err := d.st.View(func(tx *store.Tx) error {
		var err error
		recs, _, err = store.List[portRecord](tx, kindPorts, "", 0, nil)
		return err
	})
	out := make(map[string][]addressPair, len(recs))
	for _, rec := range recs {
		out[rec.ID] = rec.Pairs
	}
	return out, err
}

// updatePort answers PUT /ports/{id} {"port": {"allowed_address_pairs":
// [...]}}: the pairs of an instance's port become the list (a pair's
// mac_address defaults to the port's). Pairs are stored, not enforced: the
// data plane does not filter sources. Any other attribute is a 400.
func (d *Dialect) updatePort(r *request) (int, any, error) {
	var in struct {
		Port struct {
			AllowedAddressPairs *[]struct {
				IPAddress  string `json:"ip_address"`
				MACAddress string `json:"mac_address"`
			} `json:"allowed_address_pairs"`
		} `json:"port"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	if !d.hasExtension(extAddressPairs) {
		return 0, nil, badRequest("Unrecognized attribute(s) 'allowed_address_pairs'")
	}
	if in.Port.AllowedAddressPairs == nil {
		return 0, nil, badRequest("port.allowed_address_pairs: minicloud updates the allowed address pairs of a port only")
	}
	ports, err := d.portObjects(r)
	if err != nil {
		return 0, nil, err
	}
	id := r.PathValue("id")
	i := slices.IndexFunc(ports, func(o object) bool { return o["id"] == id })
	if i < 0 {
		return 0, nil, notFound("Port %s could not be found.", id)
	}
	if owner, _ := ports[i]["device_owner"].(string); !strings.HasPrefix(owner, "compute:") {
		return 0, nil, badRequest("allowed_address_pairs: minicloud keeps address pairs of instance ports only, not of port %s", id)
	}
	mac, _ := ports[i]["mac_address"].(string)
	pairs := []addressPair{}
	for j, p := range *in.Port.AllowedAddressPairs {
		ip := p.IPAddress
		if a, err := netip.ParseAddr(ip); err == nil {
			ip = a.String()
		} else if pf, err := netip.ParsePrefix(ip); err == nil {
			ip = pf.Masked().String()
		} else {
			return 0, nil, badRequest("Invalid input for allowed_address_pairs[%d].ip_address: %q is not an IP address or CIDR", j, p.IPAddress)
		}
		pair := addressPair{IPAddress: ip, MACAddress: cmpOr(p.MACAddress, mac)}
		if slices.Contains(pairs, pair) {
			return 0, nil, badRequest("Invalid input for allowed_address_pairs: duplicate address pair %s", ip)
		}
		pairs = append(pairs, pair)
	}
	if len(pairs) > maxAddressPairs {
		return 0, nil, badRequest("Exceeded maximum amount of allowed address pairs (%d)", maxAddressPairs)
	}
	d.octMu.Lock()
	err = d.st.Update(func(tx *store.Tx) error { return store.Put(tx, kindPorts, id, portRecord{ID: id, Pairs: pairs}) })
	d.octMu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	ports, err = d.portObjects(r)
	if err != nil {
		return 0, nil, err
	}
	i = slices.IndexFunc(ports, func(o object) bool { return o["id"] == id })
	if i < 0 {
		return 0, nil, notFound("Port %s could not be found.", id)
	}
	return http.StatusOK, map[string]any{"port": ports[i]}, nil
}

// ---- floating IPs

// fipRecord is a floating IP: an address of minicloud's public pool that,
// associated with a load balancer's VIP port, is one more address of that
// load balancer in the data plane.
type fipRecord struct {
	ID          string    `json:"id"`
	Address     string    `json:"address"`
	PortID      string    `json:"port_id"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func (d *Dialect) fipBody(f fipRecord, lbs []lbRecord) map[string]any {
	var port, fixed, router any
	status := "DOWN"
	if f.PortID != "" {
		port, router = f.PortID, routerID()
		for _, lb := range lbs {
			if vipPortID(lb.ID) == f.PortID {
				fixed = lb.VIPAddress
				if lb.Status == statusActive || lb.Status == statusPendingUpdate {
					status = "ACTIVE"
				}
			}
		}
	}
	b := with(common(f.ID, "", f.CreatedAt), map[string]any{
		"floating_ip_address": f.Address, "floating_network_id": publicNetworkID(), "port_id": port,
		"fixed_ip_address": fixed, "router_id": router, "status": status, "description": f.Description,
		"dns_domain": "", "dns_name": "", "port_forwardings": []any{}, "qos_policy_id": nil,
		"updated_at": f.UpdatedAt.UTC().Format(time.RFC3339),
	})
	// A Neutron floating IP has no name: clients name it by its address.
	delete(b, "name")
	return b
}

func (d *Dialect) fips() ([]fipRecord, error) {
	var out []fipRecord
	err := d.st.View(func(tx *store.Tx) error {
		var err error
		out, _, err = store.List[fipRecord](tx, kindFloatingIPs, "", 0, nil)
		return err
	})
	return out, err
}

func (d *Dialect) floatingIPObjects(r *request) ([]object, error) {
	fs, err := d.fips()
	if err != nil {
		return nil, err
	}
	lbs, err := d.loadLBs(r)
	if err != nil {
		return nil, err
	}
	var out []object
	for _, f := range fs {
		out = append(out, toObject(d.fipBody(f, lbs)))
	}
	return out, nil
}

// vipPortLB returns the load balancer whose VIP port is portID: 404 for an
// unknown port, 400 for a port floating IPs cannot carry traffic to.
func (d *Dialect) vipPortLB(r *request, portID string) (*lbRecord, error) {
	lbs, err := d.loadLBs(r)
	if err != nil {
		return nil, err
	}
	for i := range lbs {
		if vipPortID(lbs[i].ID) == portID {
			if lbs[i].Status == statusPendingDelete {
				break
			}
			return &lbs[i], nil
		}
	}
	ports, err := d.portObjects(r)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		if p["id"] == portID {
			return nil, badRequest("port_id: minicloud carries floating IP traffic to load-balancer VIP ports only, not to port %s", portID)
		}
	}
	return nil, notFound("Port %s could not be found.", portID)
}

// optString is a JSON string attribute that may be absent, null or set:
// a floating IP update with "port_id": null disassociates it.
type optString struct {
	set   bool
	value string
}

func (o *optString) UnmarshalJSON(b []byte) error {
	o.set = true
	if string(b) == "null" {
		o.value = ""
		return nil
	}
	return json.Unmarshal(b, &o.value)
}

type fipWrite struct {
	FloatingIP struct {
		FloatingNetworkID string    `json:"floating_network_id"`
		SubnetID          string    `json:"subnet_id"`
		FloatingIPAddress string    `json:"floating_ip_address"`
		PortID            optString `json:"port_id"`
		FixedIPAddress    string    `json:"fixed_ip_address"`
		Description       *string   `json:"description"`
		ProjectID         string    `json:"project_id"`
		TenantID          string    `json:"tenant_id"`
	} `json:"floatingip"`
}

// checkAssociation validates a port (and fixed IP) for a floating IP and
// refuses a port that already has one.
func (d *Dialect) checkAssociation(r *request, fipID, portID, fixed string) (*lbRecord, error) {
	if portID == "" {
		return nil, nil
	}
	lb, err := d.vipPortLB(r, portID)
	if err != nil {
		return nil, err
	}
	if fixed != "" && fixed != lb.VIPAddress {
		return nil, badRequest("fixed_ip_address: port %s has only %s", portID, lb.VIPAddress)
	}
	fs, err := d.fips()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.PortID == portID && f.ID != fipID {
			return nil, conflict("Cannot associate floating IP with port %s using fixed IP %s, as that fixed IP already has a floating IP on external network %s.", portID, lb.VIPAddress, publicNetworkID())
		}
	}
	return lb, nil
}

func (d *Dialect) createFloatingIP(r *request) (int, any, error) {
	var in fipWrite
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	c := in.FloatingIP
	if err := checkCommon(nil, c.ProjectID, c.TenantID); err != nil {
		return 0, nil, err
	}
	switch c.FloatingNetworkID {
	case publicNetworkID():
	case "":
		return 0, nil, badRequest("floating_network_id: a floating IP needs its external network")
	case privateNetworkID():
		return 0, nil, badRequest("floating_network_id: network %s is not external", c.FloatingNetworkID)
	default:
		return 0, nil, notFound("Network %s could not be found.", c.FloatingNetworkID)
	}
	if c.SubnetID != "" && c.SubnetID != publicSubnetID() {
		return 0, nil, badRequest("subnet_id: subnet %s is not a subnet of the external network", c.SubnetID)
	}
	var want netip.Addr
	if c.FloatingIPAddress != "" {
		a, err := netip.ParseAddr(c.FloatingIPAddress)
		if err != nil {
			return 0, nil, badRequest("floating_ip_address: %q is not an IP address", c.FloatingIPAddress)
		}
		want = a
	}
	d.octMu.Lock()
	defer d.octMu.Unlock()
	portID := c.PortID.value
	lb, err := d.checkAssociation(r, "", portID, c.FixedIPAddress)
	if err != nil {
		return 0, nil, err
	}
	now := nowUTC()
	f := fipRecord{ID: newUUID(), PortID: portID, CreatedAt: now, UpdatedAt: now}
	if c.Description != nil {
		f.Description = *c.Description
	}
	err = d.st.Update(func(tx *store.Tx) error {
		if want.IsValid() {
			if err := d.srv.ClaimPublicIP(tx, want, "fip-"+f.ID); err != nil {
				if errors.Is(err, store.ErrExists) {
					return conflict("IP address %s already allocated in subnet %s", want, publicSubnetID())
				}
				return badRequest("floating_ip_address: %v", err)
			}
			f.Address = want.String()
		} else {
			a, err := d.srv.AllocatePublicIP(tx, "fip-"+f.ID)
			if errors.Is(err, store.ErrExhausted) {
				return conflict("No more IP addresses available on network %s.", publicNetworkID())
			}
			if err != nil {
				return err
			}
			f.Address = a.String()
		}
		return store.Put(tx, kindFloatingIPs, f.ID, f)
	})
	if err != nil {
		return 0, nil, err
	}
	if lb != nil {
		if err := d.syncAliases(lb); err != nil {
			return 0, nil, err
		}
	}
	lbs, err := d.loadLBs(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"floatingip": d.fipBody(f, lbs)}, nil
}

func (d *Dialect) getFIP(id string) (fipRecord, error) {
	var f fipRecord
	err := d.st.View(func(tx *store.Tx) error {
		var err error
		f, err = store.Get[fipRecord](tx, kindFloatingIPs, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return f, notFound("Floating IP %s could not be found.", id)
	}
	return f, err
}

func (d *Dialect) updateFloatingIP(r *request) (int, any, error) {
	var in fipWrite
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	u := in.FloatingIP
	if u.FloatingNetworkID != "" || u.SubnetID != "" || u.FloatingIPAddress != "" || u.ProjectID != "" || u.TenantID != "" {
		return 0, nil, badRequest("Cannot update read-only attribute floating_network_id, subnet_id, floating_ip_address or project_id")
	}
	d.octMu.Lock()
	defer d.octMu.Unlock()
	f, err := d.getFIP(r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	oldPort := f.PortID
	if u.PortID.set {
		if _, err := d.checkAssociation(r, f.ID, u.PortID.value, u.FixedIPAddress); err != nil {
			return 0, nil, err
		}
		f.PortID = u.PortID.value
	}
	if u.Description != nil {
		f.Description = *u.Description
	}
	f.UpdatedAt = nowUTC()
	if err := d.st.Update(func(tx *store.Tx) error { return store.Put(tx, kindFloatingIPs, f.ID, f) }); err != nil {
		return 0, nil, err
	}
	if err := d.syncPorts(r, oldPort, f.PortID); err != nil {
		return 0, nil, err
	}
	lbs, err := d.loadLBs(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"floatingip": d.fipBody(f, lbs)}, nil
}

func (d *Dialect) deleteFloatingIP(r *request) (int, any, error) {
	d.octMu.Lock()
	defer d.octMu.Unlock()
	f, err := d.getFIP(r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	err = d.st.Update(func(tx *store.Tx) error {
		if err := tx.Delete(kindFloatingIPs, f.ID); err != nil {
			return err
		}
		return d.srv.ReleasePublicIP(tx, f.Address)
	})
	if err != nil {
		return 0, nil, err
	}
	if err := d.syncPorts(r, f.PortID); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// syncPorts re-applies the floating IPs of the load balancers behind the
// given VIP ports.
func (d *Dialect) syncPorts(r *request, ports ...string) error {
	lbs, err := d.loadLBs(r)
	if err != nil {
		return err
	}
	for i := range lbs {
		if slices.Contains(ports, vipPortID(lbs[i].ID)) {
			if err := d.syncAliases(&lbs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncAliases makes the floating IPs on lb's VIP port addresses of its
// minicloud load balancer.
func (d *Dialect) syncAliases(lb *lbRecord) error {
	fs, err := d.fips()
	if err != nil {
		return err
	}
	var addrs []netip.Addr
	for _, f := range fs {
		if f.PortID == vipPortID(lb.ID) {
			if a, err := netip.ParseAddr(f.Address); err == nil {
				addrs = append(addrs, a)
			}
		}
	}
	d.srv.SetAliases(lb.NativeID, addrs)
	return nil
}

// disassociatePort clears the port of the floating IPs on portID (its
// load balancer is being deleted).
func (d *Dialect) disassociatePort(portID string) error {
	return d.st.Update(func(tx *store.Tx) error {
		fs, _, err := store.List[fipRecord](tx, kindFloatingIPs, "", 0, func(f *fipRecord) bool { return f.PortID == portID })
		if err != nil {
			return err
		}
		for _, f := range fs {
			f.PortID, f.UpdatedAt = "", nowUTC()
			if err := store.Put(tx, kindFloatingIPs, f.ID, f); err != nil {
				return err
			}
		}
		return nil
	})
}

// restoreAliases sets the floating IPs of every load balancer again, for a
// server that (re)starts on existing state.
func (d *Dialect) restoreAliases() error {
	fs, err := d.fips()
	if err != nil {
		return err
	}
	var lbs []lbRecord
	err = d.st.View(func(tx *store.Tx) error {
		var err error
		lbs, _, err = store.List[lbRecord](tx, kindLoadBalancers, "", 0, nil)
		return err
	})
	if err != nil {
		return err
	}
	for _, lb := range lbs {
		var addrs []netip.Addr
		for _, f := range fs {
			if f.PortID == vipPortID(lb.ID) {
				if a, err := netip.ParseAddr(f.Address); err == nil {
					addrs = append(addrs, a)
				}
			}
		}
		if len(addrs) > 0 {
			d.srv.SetAliases(lb.NativeID, addrs)
		}
	}
	return nil
}

func nowUTC() time.Time { return time.Now().UTC() }
