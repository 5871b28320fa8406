package openstack_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

// lbEnv is a cloud with two instances running backends and the VIP
// subnet's ID.
type lbEnv struct {
	*env
	insts    []*api.Instance
	backends []*minicloudtest.Backend
	vipSub   string
	pubNet   string
}

const pending = time.Hour

func startLBEnv(t *testing.T) *lbEnv {
	t.Helper()
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{PendingDelay: pending, MaxPageSize: 1})
	le := &lbEnv{env: e}
	// Both backends on one port, as a NodePort is.
	port := 0
	for _, n := range []string{"n1", "n2"} {
		inst := e.createInstance(t, api.InstanceCreate{Name: n})
		le.insts = append(le.insts, inst)
		be := minicloudtest.StartBackend(t, n, inst.PrivateIP, minicloudtest.BackendOptions{TCP: true, Port: port})
		port = be.Port
		le.backends = append(le.backends, be)
	}
	ctx := context.Background()
	pages, err := subnets.List(e.network, subnets.ListOpts{Name: "vips"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subs, _ := subnets.ExtractSubnets(pages)
	if len(subs) != 1 {
		t.Fatalf("vip subnets: %+v", subs)
	}
	le.vipSub = subs[0].ID
	pages, err = networks.List(e.network, networks.ListOpts{Name: "public"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nets, _ := networks.ExtractNetworks(pages)
	le.pubNet = nets[0].ID
	return le
}

// createOpts is a fully populated create as the upstream provider sends it.
func (le *lbEnv) createOpts(name string, port int) loadbalancers.CreateOpts {
	var members []pools.CreateMemberOpts
	for i, inst := range le.insts {
		members = append(members, pools.CreateMemberOpts{Name: inst.Name, Address: inst.PrivateIP, ProtocolPort: le.backends[i].Port, SubnetID: le.vipSub})
	}
	return loadbalancers.CreateOpts{
		Name: name, Description: "Kubernetes external service default/web", Provider: "amphora", VipSubnetID: le.vipSub, Tags: []string{"kube_service_x"},
		Listeners: []listeners.CreateOpts{{
			Name: "listener_0_" + name, Protocol: listeners.ProtocolTCP, ProtocolPort: port, ConnLimit: ptr(-1),
			DefaultPool: &pools.CreateOpts{
				Name: "pool_0_" + name, Protocol: pools.ProtocolTCP, LBMethod: pools.LBMethodRoundRobin, Members: members,
				Monitor: monitors.CreateOpts{Name: "monitor_0_" + name, Type: "TCP", Delay: 5, Timeout: 3, MaxRetries: 1, MaxRetriesDown: 3},
			},
		}},
	}
}

func (le *lbEnv) get(t *testing.T, id string) *loadbalancers.LoadBalancer {
	t.Helper()
	lb, err := loadbalancers.Get(context.Background(), le.lb, id).Extract()
	if err != nil {
		t.Fatalf("get load balancer %s: %v", id, err)
	}
	return lb
}

// settle ends the pending delay and returns the load balancer, ACTIVE.
func (le *lbEnv) settle(t *testing.T, id string) *loadbalancers.LoadBalancer {
	t.Helper()
	le.clk.advance(pending)
	lb := le.get(t, id)
	if lb.ProvisioningStatus != "ACTIVE" {
		t.Fatalf("load balancer %s is %s after the pending delay", id, lb.ProvisioningStatus)
	}
	return lb
}

func TestOctaviaLifecycle(t *testing.T) {
	le := startLBEnv(t)
	ctx := context.Background()

	status, _, body := le.raw(t, "GET", "/load-balancer/", "", "")
	vs := body["versions"].([]any)
	if status != 200 || vs[len(vs)-1].(map[string]any)["id"] != "v2.27" {
		t.Errorf("versions: %d %v", status, body)
	}

	lb, err := loadbalancers.Create(ctx, le.lb, le.createOpts("web", 18080)).Extract()
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if lb.ProvisioningStatus != "PENDING_CREATE" || lb.VipAddress == "" || lb.VipPortID == "" || len(lb.Listeners) != 1 {
		t.Fatalf("created: %+v", lb)
	}
	// Writes while pending are 409.
	_, err = loadbalancers.Update(ctx, le.lb, lb.ID, loadbalancers.UpdateOpts{Name: ptr("x")}).Extract()
	wantStatus(t, err, http.StatusConflict)
	wantStatus(t, loadbalancers.Delete(ctx, le.lb, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(), http.StatusConflict)

	lb = le.settle(t, lb.ID)
	vip := net.JoinHostPort(lb.VipAddress, "18080")
	counts := minicloudtest.CountTCP(t, vip, 4)
	if counts["n1"] != 2 || counts["n2"] != 2 {
		t.Errorf("traffic through the VIP: %v", counts)
	}
	native, err := le.mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{"openstack-loadbalancer": lb.ID}})
	if err != nil || len(native) != 1 || native[0].HealthCheck == nil || native[0].HealthCheck.Protocol != "TCP" || len(native[0].Targets) != 2 || native[0].Targets[0].InstanceID != le.insts[0].ID {
		t.Fatalf("projected load balancer: %+v, %v", native, err)
	}

	// Filters: by name (exact), by tags; listeners and pools by load balancer.
	for name, want := range map[string]int{"web": 1, "we": 0} {
		pages, err := loadbalancers.List(le.lb, loadbalancers.ListOpts{Name: name}).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := loadbalancers.ExtractLoadBalancers(pages); len(got) != want {
			t.Errorf("name=%s: %d", name, len(got))
		}
	}
	pages, err := listeners.List(le.lb, listeners.ListOpts{LoadbalancerID: lb.ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ls, _ := listeners.ExtractListeners(pages)
	if len(ls) != 1 || ls[0].DefaultPoolID == "" {
		t.Fatalf("listeners: %+v", ls)
	}
	pages, _ = pools.List(le.lb, pools.ListOpts{LoadbalancerID: "other"}).AllPages(ctx)
	if ps, _ := pools.ExtractPools(pages); len(ps) != 0 {
		t.Errorf("loadbalancer_id filter ignored: %d pools", len(ps))
	}
	poolID := ls[0].DefaultPoolID

	// A second listener, added the way the provider updates a Service.
	l2, err := listeners.Create(ctx, le.lb, listeners.CreateOpts{LoadbalancerID: lb.ID, Protocol: listeners.ProtocolTCP, ProtocolPort: 18081, Name: "listener_1"}).Extract()
	if err != nil || l2.ProvisioningStatus != "PENDING_CREATE" {
		t.Fatalf("add listener: %+v, %v", l2, err)
	}
	if got := le.get(t, lb.ID); got.ProvisioningStatus != "PENDING_UPDATE" {
		t.Errorf("load balancer while its listener is created: %s", got.ProvisioningStatus)
	}
	if got, err := listeners.Get(ctx, le.lb, ls[0].ID).Extract(); err != nil || got.ProvisioningStatus != "ACTIVE" {
		t.Errorf("the listener not written while another is created: %+v, %v", got, err)
	}
	_, err = pools.Create(ctx, le.lb, pools.CreateOpts{ListenerID: l2.ID, Protocol: pools.ProtocolTCP, LBMethod: pools.LBMethodRoundRobin}).Extract()
	wantStatus(t, err, http.StatusConflict)
	le.settle(t, lb.ID)
	p2, err := pools.Create(ctx, le.lb, pools.CreateOpts{ListenerID: l2.ID, Protocol: pools.ProtocolTCP, LBMethod: pools.LBMethodRoundRobin, Name: "pool_1"}).Extract()
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	le.settle(t, lb.ID)
	batch := []pools.BatchUpdateMemberOpts{{Address: le.insts[1].PrivateIP, ProtocolPort: le.backends[1].Port}}
	if err := pools.BatchUpdateMembers(ctx, le.lb, p2.ID, batch).ExtractErr(); err != nil {
		t.Fatalf("batch members: %v", err)
	}
	if le.get(t, lb.ID).ProvisioningStatus != "PENDING_UPDATE" {
		t.Error("batch update did not make the load balancer PENDING_UPDATE")
	}
	le.settle(t, lb.ID)
	// Each listener has its own pool's members: the second n2 only, the
	// first still both.
	native, _ = le.mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{"openstack-loadbalancer": lb.ID}})
	if len(native[0].Listeners) != 2 || len(native[0].Targets) != 2 || len(native[0].Listeners[1].Targets) != 1 || native[0].Listeners[1].Targets[0].InstanceID != le.insts[1].ID {
		t.Errorf("projection with differing pools: %+v", native[0])
	}
	if c := minicloudtest.CountTCP(t, net.JoinHostPort(lb.VipAddress, "18081"), 2); c["n2"] != 2 {
		t.Errorf("second listener: %v", c)
	}
	if c := minicloudtest.CountTCP(t, net.JoinHostPort(lb.VipAddress, "18080"), 4); c["n1"] == 0 || c["n2"] == 0 {
		t.Errorf("first listener after the second's pool got one member: %v, want n1 and n2", c)
	}
	pages, err = pools.ListMembers(le.lb, p2.ID, pools.ListMembersOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ms, _ := pools.ExtractMembers(pages); len(ms) != 1 || ms[0].Address != le.insts[1].PrivateIP {
		t.Errorf("members: %+v", ms)
	}

	// What cannot be projected is a 400 naming the field; nothing changes.
	for field, opts := range map[string]listeners.CreateOpts{
		"protocol":      {LoadbalancerID: lb.ID, Protocol: listeners.ProtocolHTTP, ProtocolPort: 18082},
		"protocol_port": {LoadbalancerID: lb.ID, Protocol: listeners.ProtocolTCP, ProtocolPort: 70000},
	} {
		_, err := listeners.Create(ctx, le.lb, opts).Extract()
		wantStatus(t, err, http.StatusBadRequest)
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	_, err = pools.Update(ctx, le.lb, poolID, pools.UpdateOpts{LBMethod: pools.LBMethodLeastConnections}).Extract()
	wantStatus(t, err, http.StatusBadRequest)
	_, err = listeners.Create(ctx, le.lb, listeners.CreateOpts{LoadbalancerID: lb.ID, Protocol: listeners.ProtocolTCP, ProtocolPort: 18080}).Extract()
	wantStatus(t, err, http.StatusConflict)
	if got := le.get(t, lb.ID); got.ProvisioningStatus != "ACTIVE" || len(got.Listeners) != 2 {
		t.Errorf("rejected writes changed the load balancer: %+v", got)
	}

	// ERROR is injectable; a delete without cascade is refused while
	// children exist; cascade deletes the tree.
	req, _ := http.NewRequest("PUT", le.mc.URL+"/v1/_openstack/loadbalancers/"+lb.ID+"/provisioning_status", strings.NewReader(`{"provisioning_status":"ERROR"}`))
	req.Header.Set("Authorization", "Bearer "+le.mc.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("inject ERROR: %v %v", resp, err)
	}
	resp.Body.Close()
	if got := le.get(t, lb.ID); got.ProvisioningStatus != "ERROR" {
		t.Errorf("after injection: %s", got.ProvisioningStatus)
	}
	wantStatus(t, loadbalancers.Delete(ctx, le.lb, lb.ID, nil).ExtractErr(), http.StatusBadRequest)
	if err := loadbalancers.Delete(ctx, le.lb, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); err != nil {
		t.Fatalf("cascade delete: %v", err)
	}
	if got := le.get(t, lb.ID); got.ProvisioningStatus != "PENDING_DELETE" {
		t.Errorf("deleting: %s", got.ProvisioningStatus)
	}
	if !minicloudtest.Refused(vip) {
		t.Error("the VIP still accepts connections after the delete")
	}
	le.clk.advance(pending)
	_, err = loadbalancers.Get(ctx, le.lb, lb.ID).Extract()
	wantStatus(t, err, http.StatusNotFound)
	if n, _ := le.mc.Client.ListLoadBalancers(ctx, client.ListOptions{}); len(n) != 0 {
		t.Errorf("minicloud load balancers left: %+v", n)
	}
}

// TestOctaviaRejects: bodies the dialect cannot serve are 4xx in Octavia's
// format and create nothing.
func TestOctaviaRejects(t *testing.T) {
	le := startLBEnv(t)
	ctx := context.Background()
	tok := le.token(t)
	o := le.createOpts("x", 18090)
	o.VipAddress = "127.100.0.9"
	_, err := loadbalancers.Create(ctx, le.lb, o).Extract()
	wantStatus(t, err, http.StatusBadRequest)
	o = le.createOpts("x", 18090)
	o.Listeners[0].DefaultPool.Members[1].ProtocolPort++
	_, err = loadbalancers.Create(ctx, le.lb, o).Extract()
	wantStatus(t, err, http.StatusBadRequest)

	for _, c := range []struct{ body, want string }{
		{`{"loadbalancer":{"name":"x","vip_subnet_id":"` + le.vipSub + `","bogus":1}}`, "bogus"},
		{`{"loadbalancer":{"name":7}}`, "loadbalancer.name: expected a string, got a JSON number"},
		{`{"loadbalancer":{"listeners":[{"protocol_port":"80"}]}}`, "loadbalancer.listeners.protocol_port: expected an integer, got a JSON string"},
		{`{"loadbalancer":{"tags":"a"}}`, "loadbalancer.tags: expected a list"},
		{`[1]`, "a JSON object is required"},
		{`{"loadbalancer":{"name":"x"`, "ends before the value is complete"},
		{`{"loadbalancer":{"name":x}}`, "Malformed JSON in request body at offset"},
		{`{"loadbalancer":{}} trailing`, "after"},
		{`{"loadbalancer":{"vip_subnet_id":"nope"}}`, "vip_subnet_id"},
	} {
		status, _, body := le.raw(t, "POST", "/load-balancer/v2.0/lbaas/loadbalancers", c.body, tok)
		msg, _ := body["faultstring"].(string)
		if status != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("POST %s: %d %v, want 400 saying %q", c.body, status, body, c.want)
		}
		// The answer speaks the API's terms, not the decoder's.
		for _, internal := range []string{"Go ", "struct", "unmarshal", "openstack."} {
			if strings.Contains(msg, internal) {
				t.Errorf("POST %s: the error shows Go internals (%q): %s", c.body, internal, msg)
			}
		}
	}
	big := `{"loadbalancer":{"name":"` + strings.Repeat("x", 2<<20) + `"}}`
	if status, _, _ := le.raw(t, "POST", "/load-balancer/v2.0/lbaas/loadbalancers", big, tok); status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d", status)
	}
	for path, want := range map[string]int{
		"/load-balancer/v2.0/lbaas/loadbalancers/nope":         404,
		"/load-balancer/v2.0/lbaas/loadbalancers?marker=nope":  400,
		"/load-balancer/v2.0/lbaas/loadbalancers?colour=blue":  400,
		"/load-balancer/v2.0/lbaas/pools/nope/members":         404,
		"/load-balancer/v2/lbaas/listeners?protocol_port=80":   200,
		"/load-balancer/v2.0/lbaas/healthmonitors?pool_id=abc": 200,
	} {
		status, _, body := le.raw(t, "GET", path, "", tok)
		if status != want || (want >= 400 && body["faultstring"] == nil) {
			t.Errorf("GET %s: %d %v, want %d", path, status, body, want)
		}
	}
	if n, _ := le.mc.Client.ListLoadBalancers(ctx, client.ListOptions{}); len(n) != 0 {
		t.Errorf("rejected creates left minicloud load balancers: %+v", n)
	}
}

// TestOctaviaPaging: lists page with limit and marker and next links.
func TestOctaviaPaging(t *testing.T) {
	le := startLBEnv(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := loadbalancers.Create(ctx, le.lb, le.createOpts("lb"+strconv.Itoa(i), 18100+i)).Extract(); err != nil {
			t.Fatal(err)
		}
	}
	le.mc.Client.ResetStats(ctx)
	pages, err := loadbalancers.List(le.lb, nil).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := loadbalancers.ExtractLoadBalancers(pages)
	if len(all) != 3 {
		t.Errorf("%d load balancers over pages of one", len(all))
	}
	st, _ := le.mc.Client.Stats(ctx)
	if n := st.Requests["GET /load-balancer/v2.0/lbaas/loadbalancers"]; n != 3 {
		t.Errorf("%d pages fetched, want 3", n)
	}
}

// TestFloatingIP: a floating IP on a VIP port carries traffic to the load
// balancer; deleting the floating IP (or the load balancer) stops it.
func TestFloatingIP(t *testing.T) {
	le := startLBEnv(t)
	ctx := context.Background()
	lb, err := loadbalancers.Create(ctx, le.lb, le.createOpts("web", 18200)).Extract()
	if err != nil {
		t.Fatal(err)
	}
	le.settle(t, lb.ID)
	fip, err := floatingips.Create(ctx, le.network, floatingips.CreateOpts{
		FloatingNetworkID: le.pubNet, PortID: lb.VipPortID, Description: "Floating IP for Kubernetes external service default/web from cluster kubernetes",
	}).Extract()
	if err != nil {
		t.Fatalf("create floating IP: %v", err)
	}
	if fip.PortID != lb.VipPortID || fip.FixedIP != lb.VipAddress || fip.Status != "ACTIVE" || !le.mc.Config.PublicCIDR.Contains(mustAddr(t, fip.FloatingIP)) {
		t.Fatalf("floating IP: %+v", fip)
	}
	addr := net.JoinHostPort(fip.FloatingIP, "18200")
	if c := minicloudtest.CountTCP(t, addr, 2); c["n1"]+c["n2"] != 2 {
		t.Errorf("traffic through the floating IP: %v", c)
	}
	pages, err := floatingips.List(le.network, floatingips.ListOpts{PortID: lb.VipPortID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fs, _ := floatingips.ExtractFloatingIPs(pages); len(fs) != 1 || fs[0].ID != fip.ID {
		t.Errorf("by port_id: %+v", fs)
	}
	// A Neutron floating IP has no name attribute (clients show and find
	// it by its address), and name is no filter of floating IPs.
	tok := le.token(t)
	if _, _, body := le.raw(t, "GET", "/network/v2.0/floatingips/"+fip.ID, "", tok); body["floatingip"] == nil || body["floatingip"].(map[string]any)["name"] != nil {
		t.Errorf("floating IP body: %v", body)
	}
	if status, _, _ := le.raw(t, "GET", "/network/v2.0/floatingips?name="+fip.FloatingIP, "", tok); status != 400 {
		t.Errorf("name filter on floating IPs: %d, want 400", status)
	}
	pages, _ = floatingips.List(le.network, floatingips.ListOpts{PortID: "other"}).AllPages(ctx)
	if fs, _ := floatingips.ExtractFloatingIPs(pages); len(fs) != 0 {
		t.Errorf("port_id filter ignored: %+v", fs)
	}
	// A second floating IP on the same port is a 409; one on an instance
	// port a 400.
	_, err = floatingips.Create(ctx, le.network, floatingips.CreateOpts{FloatingNetworkID: le.pubNet, PortID: lb.VipPortID}).Extract()
	wantStatus(t, err, http.StatusConflict)
	pages, _ = ports.List(le.network, ports.ListOpts{DeviceID: le.insts[0].ID}).AllPages(ctx)
	ip, _ := ports.ExtractPorts(pages)
	_, err = floatingips.Create(ctx, le.network, floatingips.CreateOpts{FloatingNetworkID: le.pubNet, PortID: ip[0].ID}).Extract()
	wantStatus(t, err, http.StatusBadRequest)
	pages, _ = floatingips.List(le.network, floatingips.ListOpts{}).AllPages(ctx)
	if fs, _ := floatingips.ExtractFloatingIPs(pages); len(fs) != 1 {
		t.Errorf("rejected creates left floating IPs: %+v", fs)
	}

	// Disassociate: traffic stops; associate again: it flows.
	fip, err = floatingips.Update(ctx, le.network, fip.ID, floatingips.UpdateOpts{PortID: new(string)}).Extract()
	if err != nil || fip.PortID != "" {
		t.Fatalf("disassociate: %+v, %v", fip, err)
	}
	if !minicloudtest.Refused(addr) {
		t.Error("a disassociated floating IP still accepts connections")
	}
	if _, err := floatingips.Update(ctx, le.network, fip.ID, floatingips.UpdateOpts{PortID: &lb.VipPortID}).Extract(); err != nil {
		t.Fatal(err)
	}
	if c := minicloudtest.CountTCP(t, addr, 1); len(c) != 1 {
		t.Errorf("re-associated: %v", c)
	}
	if err := floatingips.Delete(ctx, le.network, fip.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if !minicloudtest.Refused(addr) {
		t.Error("a deleted floating IP still accepts connections")
	}
	_, err = floatingips.Get(ctx, le.network, fip.ID).Extract()
	wantStatus(t, err, http.StatusNotFound)
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRestart: the Octavia tree and floating IPs survive a restart on the
// same state, and the floating IP carries traffic again.
func TestRestart(t *testing.T) {
	le := startLBEnv(t)
	ctx := context.Background()
	lb, err := loadbalancers.Create(ctx, le.lb, le.createOpts("web", 18300)).Extract()
	if err != nil {
		t.Fatal(err)
	}
	le.settle(t, lb.ID)
	fip, err := floatingips.Create(ctx, le.network, floatingips.CreateOpts{FloatingNetworkID: le.pubNet, PortID: lb.VipPortID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(fip.FloatingIP, "18300")
	minicloudtest.CountTCP(t, addr, 1)

	cfg := le.mc.Config
	if err := le.mc.Stop(); err != nil {
		t.Fatal(err)
	}
	if !minicloudtest.Refused(addr) {
		t.Fatal("the floating IP still listens after the stop")
	}
	again := startEnv(t, minicloudtest.Options{Token: le.mc.Token, StateDir: cfg.StateDir, InstanceCIDR: cfg.InstanceCIDR, PublicCIDR: cfg.PublicCIDR, VIPCIDR: cfg.VIPCIDR},
		openstack.Options{PendingDelay: pending})
	got, err := loadbalancers.Get(ctx, again.lb, lb.ID).Extract()
	if err != nil || got.ProvisioningStatus != "ACTIVE" || got.VipAddress != lb.VipAddress || len(got.Listeners) != 1 {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
	var c map[string]int
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !minicloudtest.Refused(addr), nil
	})
	if err != nil {
		t.Fatalf("floating IP not listening after restart: %v", err)
	}
	if c = minicloudtest.CountTCP(t, addr, 2); c["n1"]+c["n2"] != 2 {
		t.Errorf("traffic through the floating IP after restart: %v", c)
	}
}
