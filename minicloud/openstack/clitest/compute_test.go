package clitest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/minicloud"
)

// TestComputeReads: server list (all pages, name regex, limit and marker),
// server show, flavor list and show, availability zones.
func TestComputeReads(t *testing.T) {
	skipShort(t)
	mc, insts, _ := startCloud(t)
	c := newCLI(t, mc)

	// As against Nova, the list is one page (here three servers) unless
	// --limit -1 asks for all of them.
	var servers []row
	c.json(&servers, "server", "list")
	if got := names(servers, "Name"); !sameSet(got, []string{"web-1", "web-2", "db-1"}) {
		t.Fatalf("server list (first page): %v", servers)
	}
	c.json(&servers, "server", "list", "--limit", "-1")
	if got := names(servers, "Name"); !sameSet(got, []string{"web-1", "web-2", "db-1", "db-2"}) {
		t.Fatalf("server list --limit -1: %v", servers)
	}
	for _, s := range servers {
		if s["Status"] != "ACTIVE" || s["Flavor"] != "mc.small" {
			t.Errorf("server list row %v: want ACTIVE with flavor mc.small", s)
		}
	}
	c.json(&servers, "server", "list", "--name", "^web-")
	if got := names(servers, "Name"); !sameSet(got, []string{"web-1", "web-2"}) {
		t.Errorf("server list --name ^web-: %v", got)
	}
	c.json(&servers, "server", "list", "--limit", "1")
	if len(servers) != 1 {
		t.Errorf("server list --limit 1: %v", servers)
	}
	c.json(&servers, "server", "list", "--marker", insts[0].ID)
	if got := names(servers, "Name"); !sameSet(got, []string{"web-2", "db-1", "db-2"}) {
		t.Errorf("server list --marker <web-1>: %v", got)
	}

	var s row
	c.json(&s, "server", "show", "web-1")
	if s["id"] != insts[0].ID || s["status"] != "ACTIVE" || s["OS-EXT-AZ:availability_zone"] != insts[0].Zone ||
		s["flavor"] != "mc.small (mc.small)" || !strings.Contains(str(s["addresses"]), insts[0].PrivateIP) {
		t.Errorf("server show web-1: %v", s)
	}
	c.json(&s, "server", "show", insts[2].ID)
	if s["name"] != "db-1" {
		t.Errorf("server show <db-1's ID>: %v", s)
	}
	if msg := c.fails("server", "show", "nosuch"); !strings.Contains(msg, "No server with a name or ID of 'nosuch' exists") {
		t.Errorf("server show nosuch: %s", msg)
	}

	var flavors []row
	c.json(&flavors, "flavor", "list")
	if !slices.Contains(names(flavors, "Name"), "mc.small") {
		t.Errorf("flavor list: %v", flavors)
	}
	var f row
	c.json(&f, "flavor", "show", "mc.small")
	if f["name"] != "mc.small" || f["vcpus"] != 1.0 || f["ram"] != 2048.0 || str(f["properties"]) != "{}" {
		t.Errorf("flavor show mc.small: %v", f)
	}

	// A cloud without quotas or key pairs: unlimited, the use counted.
	var limits []row
	c.json(&limits, "limits", "show", "--absolute")
	want := map[string]float64{"maxTotalInstances": -1, "totalInstancesUsed": 4, "totalCoresUsed": 4, "totalRAMUsed": 4 * 2048}
	for _, l := range limits {
		if w, ok := want[str(l["Name"])]; ok {
			if l["Value"] != w {
				t.Errorf("limits show: %v = %v, want %v", l["Name"], l["Value"], w)
			}
			delete(want, str(l["Name"]))
		}
	}
	if len(want) > 0 {
		t.Errorf("limits show --absolute lacks %v: %v", want, limits)
	}
	var keypairs []row
	c.json(&keypairs, "keypair", "list")
	if len(keypairs) != 0 {
		t.Errorf("keypair list: %v", keypairs)
	}

	// The client asks for the zones' detail first, is refused (403, as
	// Nova refuses a project's token) and falls back to the list.
	var zones []row
	c.json(&zones, "availability", "zone", "list", "--compute")
	if got := names(zones, "Zone Name"); !sameSet(got, minicloud.Zones) {
		t.Errorf("availability zone list: %v", zones)
	}
	for _, z := range zones {
		if z["Zone Status"] != "available" {
			t.Errorf("zone %v", z)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
