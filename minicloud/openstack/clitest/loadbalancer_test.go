package clitest_test

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// TestLoadBalancerWorkflow builds a load balancer the Octavia way, one
// object at a time with --wait (bare, listener, pool, members, monitor),
// checking the traffic through its VIP at each step, then through a
// floating IP created, shown, associated, disassociated and deleted with
// the floating ip commands; reads the status tree and deletes it all with
// --cascade.
func TestLoadBalancerWorkflow(t *testing.T) {
	skipShort(t)
	mc, insts, port := startCloud(t)
	c := newCLI(t, mc)
	const lport = 18080
	var rows []row
	c.json(&rows, "loadbalancer", "provider", "list")
	if got := names(rows, "name"); !sameSet(got, []string{"amphora", "octavia"}) {
		t.Errorf("loadbalancer provider list: %v", rows)
	}
	for _, what := range []string{"flavor", "availabilityzone"} {
		c.json(&rows, "loadbalancer", what, "list")
		if len(rows) != 0 {
			t.Errorf("loadbalancer %s list: %v, want none", what, rows)
		}
	}

	var lb row
	c.json(&lb, "loadbalancer", "create", "--name", "web", "--vip-subnet-id", "vips", "--wait")
	c.json(&lb, "loadbalancer", "show", "web")
	vip := net.JoinHostPort(str(lb["vip_address"]), strconv.Itoa(lport))
	if lb["provisioning_status"] != "ACTIVE" || lb["vip_port_id"] == nil {
		t.Fatalf("loadbalancer show web after create --wait: %v", lb)
	}
	if !minicloudtest.Refused(vip) {
		t.Error("a load balancer without listeners accepts connections")
	}

	var obj row
	c.json(&obj, "loadbalancer", "listener", "create", "--name", "web-80", "--protocol", "TCP", "--protocol-port", strconv.Itoa(lport), "--wait", "web")
	c.json(&obj, "loadbalancer", "pool", "create", "--name", "web-pool", "--listener", "web-80", "--protocol", "TCP", "--lb-algorithm", "ROUND_ROBIN", "--wait")
	if !minicloudtest.Refused(vip) {
		t.Error("a listener whose pool has no members accepts connections")
	}
	c.json(&obj, "loadbalancer", "member", "create", "--name", "web-1", "--address", insts[0].PrivateIP, "--protocol-port", strconv.Itoa(port), "--subnet-id", "instances", "--wait", "web-pool")
	if got := minicloudtest.CountTCP(t, vip, 3); got["web-1"] != 3 {
		t.Errorf("one member: connections %v, want all to web-1", got)
	}
	c.json(&obj, "loadbalancer", "member", "create", "--name", "web-2", "--address", insts[1].PrivateIP, "--protocol-port", strconv.Itoa(port), "--subnet-id", "instances", "--wait", "web-pool")
	c.json(&obj, "loadbalancer", "healthmonitor", "create", "--name", "web-hm", "--delay", "5", "--timeout", "3", "--max-retries", "2", "--type", "TCP", "--wait", "web-pool")
	if got := minicloudtest.CountTCP(t, vip, 4); got["web-1"] == 0 || got["web-2"] == 0 || got["web-1"]+got["web-2"] != 4 {
		t.Errorf("two members: connections %v, want both", got)
	}

	for cmd, want := range map[string]string{"listener": "web-80", "pool": "web-pool", "healthmonitor": "web-hm"} {
		c.json(&rows, "loadbalancer", cmd, "list")
		if got := names(rows, "name"); len(got) != 1 || got[0] != want {
			t.Errorf("loadbalancer %s list: %v", cmd, rows)
		}
	}
	c.json(&rows, "loadbalancer", "member", "list", "web-pool")
	if got := names(rows, "name"); !sameSet(got, []string{"web-1", "web-2"}) {
		t.Errorf("loadbalancer member list web-pool: %v", rows)
	}
	c.json(&rows, "loadbalancer", "list")
	if len(rows) != 1 || rows[0]["provisioning_status"] != "ACTIVE" || rows[0]["name"] != "web" {
		t.Errorf("loadbalancer list: %v", rows)
	}

	// The status tree (the command prints the API's "statuses"): every
	// object ACTIVE, the members as probed.
	var tree struct {
		LoadBalancer struct {
			ProvisioningStatus string `json:"provisioning_status"`
			Listeners          []struct {
				Name  string `json:"name"`
				Pools []struct {
					Name    string `json:"name"`
					Monitor *struct {
						Type string `json:"type"`
					} `json:"health_monitor"`
					Members []struct {
						Name               string `json:"name"`
						ProvisioningStatus string `json:"provisioning_status"`
					} `json:"members"`
				} `json:"pools"`
			} `json:"listeners"`
		} `json:"loadbalancer"`
	}
	out := c.ok("loadbalancer", "status", "show", "web")
	if err := json.Unmarshal([]byte(out), &tree); err != nil {
		t.Fatalf("loadbalancer status show: %v\n%s", err, out)
	}
	st := tree.LoadBalancer
	if st.ProvisioningStatus != "ACTIVE" || len(st.Listeners) != 1 || st.Listeners[0].Name != "web-80" || len(st.Listeners[0].Pools) != 1 ||
		st.Listeners[0].Pools[0].Monitor == nil || st.Listeners[0].Pools[0].Monitor.Type != "TCP" || len(st.Listeners[0].Pools[0].Members) != 2 {
		t.Errorf("loadbalancer status show web:\n%s", out)
	}

	// A floating IP, created alone, then associated with the VIP port.
	var fip row
	c.json(&fip, "floating", "ip", "create", "public", "--description", "web's address")
	addr := str(fip["floating_ip_address"])
	if !mc.Config.PublicCIDR.Contains(mustAddr(t, addr)) || fip["port_id"] != nil {
		t.Fatalf("floating ip create public: %v", fip)
	}
	c.json(&rows, "floating", "ip", "list")
	if len(rows) != 1 || rows[0]["Floating IP Address"] != addr {
		t.Errorf("floating ip list: %v", rows)
	}
	c.ok("floating", "ip", "set", "--port", str(lb["vip_port_id"]), addr)
	c.json(&fip, "floating", "ip", "show", addr)
	if fip["port_id"] != lb["vip_port_id"] || fip["fixed_ip_address"] != lb["vip_address"] || fip["description"] != "web's address" {
		t.Errorf("floating ip show %s after set --port: %v", addr, fip)
	}
	faddr := net.JoinHostPort(addr, strconv.Itoa(lport))
	if got := minicloudtest.CountTCP(t, faddr, 4); got["web-1"] == 0 || got["web-2"] == 0 {
		t.Errorf("through the floating IP: connections %v, want both members", got)
	}
	c.ok("floating", "ip", "unset", "--port", addr)
	if !minicloudtest.Refused(faddr) {
		t.Error("the floating IP still carries traffic after unset --port")
	}
	c.json(&fip, "floating", "ip", "show", addr)
	if fip["port_id"] != nil {
		t.Errorf("floating ip show after unset --port: %v", fip)
	}
	c.ok("floating", "ip", "delete", addr)
	if msg := c.fails("floating", "ip", "show", addr); !strings.Contains(msg, addr) {
		t.Errorf("floating ip show after delete: %s", msg)
	}

	// Cascade delete: the tree and its traffic are gone.
	c.ok("loadbalancer", "delete", "--cascade", "--wait", "web")
	c.json(&rows, "loadbalancer", "list")
	if len(rows) != 0 {
		t.Errorf("loadbalancer list after delete: %v", rows)
	}
	if !minicloudtest.Refused(vip) {
		t.Error("the VIP still accepts connections after the delete")
	}
}
