package clitest_test

import (
	"slices"
	"strings"
	"testing"
)

// TestNetworkReads: security groups, networks, subnets, ports and the
// router as Neutron shows them, and the router's extra routes written with
// router add/remove route (extraroute-atomic) and router set --route.
func TestNetworkReads(t *testing.T) {
	skipShort(t)
	mc, insts, _ := startCloud(t)
	c := newCLI(t, mc)

	var rows []row
	c.json(&rows, "security", "group", "list")
	if got := names(rows, "Name"); !slices.Equal(got, []string{"default"}) {
		t.Errorf("security group list: %v", rows)
	}
	var sg row
	c.json(&sg, "security", "group", "show", "default")
	if sg["name"] != "default" || !strings.Contains(str(sg["rules"]), "egress") {
		t.Errorf("security group show default: %v", sg)
	}

	c.json(&rows, "security", "group", "rule", "list", "default")
	if len(rows) != 2 || rows[0]["Direction"] != "egress" {
		t.Errorf("security group rule list default: %v", rows)
	}

	c.json(&rows, "network", "list")
	if got := names(rows, "Name"); !sameSet(got, []string{"minicloud", "public"}) {
		t.Errorf("network list: %v", rows)
	}
	c.json(&rows, "network", "list", "--external")
	if got := names(rows, "Name"); !slices.Equal(got, []string{"public"}) {
		t.Errorf("network list --external: %v", rows)
	}
	var nw row
	c.json(&nw, "network", "show", "minicloud")
	if nw["status"] != "ACTIVE" || len(nw["subnets"].([]any)) != 3 {
		t.Errorf("network show minicloud: %v", nw)
	}

	c.json(&rows, "subnet", "list")
	if got := names(rows, "Name"); !sameSet(got, []string{"instances", "instances-v6", "vips", "public"}) {
		t.Errorf("subnet list: %v", rows)
	}
	var sub row
	c.json(&sub, "subnet", "show", "instances")
	if sub["cidr"] != mc.Config.InstanceCIDR.String() || sub["gateway_ip"] == nil {
		t.Errorf("subnet show instances: %v", sub)
	}

	c.json(&rows, "port", "list", "--server", "web-1")
	if len(rows) != 1 || !strings.Contains(str(rows[0]["Fixed IP Addresses"]), insts[0].PrivateIP) || rows[0]["Status"] != "ACTIVE" {
		t.Fatalf("port list --server web-1: %v", rows)
	}
	var port row
	c.json(&port, "port", "show", str(rows[0]["ID"]))
	if port["device_id"] != insts[0].ID || port["device_owner"] != "compute:"+insts[0].Zone {
		t.Errorf("port show: %v", port)
	}
	c.json(&rows, "port", "list", "--network", "minicloud", "--long")
	if len(rows) != len(insts)+1 {
		t.Errorf("port list --network minicloud: %d ports, want %d (the instances' and the router's): %v", len(rows), len(insts)+1, rows)
	}

	c.json(&rows, "router", "list")
	if got := names(rows, "Name"); !slices.Equal(got, []string{"minicloud"}) {
		t.Errorf("router list: %v", rows)
	}
	var rt row
	c.json(&rt, "router", "show", "minicloud")
	if !strings.Contains(str(rt["interfaces_info"]), str(sub["gateway_ip"])) {
		t.Errorf("router show: interfaces_info %v, want the instances subnet's gateway %v", rt["interfaces_info"], sub["gateway_ip"])
	}
	c.ok("router", "add", "route", "--route", "destination=10.244.1.0/24,gateway="+insts[0].PrivateIP, "minicloud")
	c.ok("router", "set", "--route", "destination=10.244.2.0/24,gateway="+insts[1].PrivateIP, "minicloud")
	c.json(&rt, "router", "show", "minicloud")
	for _, want := range []string{"10.244.1.0/24", "10.244.2.0/24", insts[0].PrivateIP, insts[1].PrivateIP} {
		if !strings.Contains(str(rt["routes"]), want) {
			t.Errorf("router show after adding routes: %v, want %s", rt["routes"], want)
		}
	}
	c.ok("router", "remove", "route", "--route", "destination=10.244.1.0/24,gateway="+insts[0].PrivateIP, "minicloud")
	c.json(&rt, "router", "show", "minicloud")
	if strings.Contains(str(rt["routes"]), "10.244.1.0/24") || !strings.Contains(str(rt["routes"]), "10.244.2.0/24") {
		t.Errorf("router show after removing a route: %v", rt["routes"])
	}
	// A next hop that is no instance is refused, as Neutron refuses a
	// next hop outside the router's subnets.
	msg := c.fails("router", "add", "route", "--route", "destination=10.244.3.0/24,gateway=192.0.2.1", "minicloud")
	if !strings.Contains(msg, "400") && !strings.Contains(strings.ToLower(msg), "nexthop") {
		t.Errorf("a route to a next hop that is no instance: %s", msg)
	}
}
