package openstack_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
	"github.com/stratus-ccm/stratus/providers/openstack"
)

// octavia is an Octavia client of the test's own, to read what the
// provider built.
func (e *env) octavia(t *testing.T) *gophercloud.ServiceClient {
	t.Helper()
	pc, err := gos.AuthenticatedClient(context.Background(), gophercloud.AuthOptions{IdentityEndpoint: e.mc.IdentityURL, Username: "t", Password: e.mc.Token,
		DomainName: mos.DomainName, TenantName: mos.ProjectName, AllowReauth: true})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := gos.NewLoadBalancerV2(pc, gophercloud.EndpointOpts{Region: minicloud.Region})
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// octaviaLB is the Service's Octavia load balancer with its listeners and
// pools.
func (le *lbEnv) octaviaLB(t *testing.T) (*loadbalancers.LoadBalancer, []listeners.Listener, []pools.Pool) {
	t.Helper()
	ctx := context.Background()
	lc := le.octavia(t)
	pages, err := loadbalancers.List(lc, loadbalancers.ListOpts{Name: "kube_service_kubernetes_default_web"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lbs, _ := loadbalancers.ExtractLoadBalancers(pages)
	if len(lbs) != 1 {
		t.Fatalf("load balancers %+v", lbs)
	}
	pages, _ = listeners.List(lc, listeners.ListOpts{LoadbalancerID: lbs[0].ID}).AllPages(ctx)
	ls, _ := listeners.ExtractListeners(pages)
	pages, _ = pools.List(lc, pools.ListOpts{LoadbalancerID: lbs[0].ID}).AllPages(ctx)
	ps, _ := pools.ExtractPools(pages)
	return &lbs[0], ls, ps
}

// gone waits until the Service's load balancer is deleted.
func (le *lbEnv) gone(t *testing.T, lb cloudprovider.LoadBalancer, svc *v1.Service) {
	t.Helper()
	le.clk.advance(pending)
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc)
		le.clk.advance(pending)
		return !exists, err
	})
	if err != nil {
		t.Fatalf("load balancer not gone: %v", err)
	}
}

func addr(st *v1.LoadBalancerStatus, port int) string {
	return net.JoinHostPort(st.Ingress[0].IP, strconv.Itoa(port))
}

// TestServiceChanges: ports added, renumbered, switched to UDP and removed
// each reach the load balancer (the other ports keep serving), traffic
// follows every step, and a change of nodes is one batch member update.
func TestServiceChanges(t *testing.T) {
	le := startLB(t)
	lb, _ := le.provider(t, "")
	ctx := context.Background()
	svc := service(18310, le.port)
	st, _ := le.ensure(t, lb, svc, le.nodes)

	// A second port.
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 18311, NodePort: int32(le.port)})
	st2, retries := le.ensure(t, lb, svc, le.nodes)
	if retries == 0 || st2.Ingress[0].IP != st.Ingress[0].IP {
		t.Fatalf("adding a port: %v after %d retries (was %v)", st2, retries, st)
	}
	for _, p := range []int{18310, 18311} {
		if c := minicloudtest.CountTCP(t, addr(st, p), 3); c["n1"]+c["n2"]+c["n3"] != 3 {
			t.Errorf("port %d: %v", p, c)
		}
	}
	// Renumbered: the new listener first, then the old one goes.
	svc.Spec.Ports[1].Port = 18312
	le.ensure(t, lb, svc, le.nodes)
	if c := minicloudtest.CountTCP(t, addr(st, 18312), 3); c["n1"]+c["n2"]+c["n3"] != 3 {
		t.Errorf("renumbered port: %v", c)
	}
	if !minicloudtest.Refused(addr(st, 18311)) {
		t.Error("the old port still accepts connections")
	}
	// The protocol changes: UDP on the same port.
	svc.Spec.Ports[1].Protocol = v1.ProtocolUDP
	le.ensure(t, lb, svc, le.nodes)
	if got, err := minicloudtest.AskUDP(addr(st, 18312), "ping"); err != nil || !strings.HasSuffix(got, ":ping") {
		t.Errorf("UDP through the changed port: %q, %v", got, err)
	}
	if !minicloudtest.Refused(addr(st, 18312)) {
		t.Error("TCP on the port now UDP still accepts connections")
	}
	_, ls, ps := le.octaviaLB(t)
	if len(ls) != 2 || len(ps) != 2 {
		t.Errorf("after the changes: %d listeners, %d pools; want 2 and 2", len(ls), len(ps))
	}
	// Removed.
	svc.Spec.Ports = svc.Spec.Ports[:1]
	le.ensure(t, lb, svc, le.nodes)
	if _, ls, ps = le.octaviaLB(t); len(ls) != 1 || len(ps) != 1 || ls[0].ProtocolPort != 18310 {
		t.Errorf("after removing the port: listeners %+v, %d pools", ls, len(ps))
	}
	if c := minicloudtest.CountTCP(t, addr(st, 18310), 3); c["n1"]+c["n2"]+c["n3"] != 3 {
		t.Errorf("remaining port: %v", c)
	}

	// Nodes change: one batch update of the one pool.
	if err := le.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	le.ensure(t, lb, svc, le.nodes[1:])
	if n := le.requests(t, "PUT /load-balancer/v2.0/lbaas/pools/{pool}/members"); n != 1 {
		t.Errorf("member batch updates for one node change: %d, want 1", n)
	}
	if c := minicloudtest.CountTCP(t, addr(st, 18310), 4); c["n1"] != 0 || c["n2"] == 0 || c["n3"] == 0 {
		t.Errorf("traffic after n1 left: %v", c)
	}
}

// TestSourceRanges: spec.loadBalancerSourceRanges are every listener's
// allowed_cidrs; a source outside gets no answer; changing and clearing
// them reaches every listener.
func TestSourceRanges(t *testing.T) {
	le := startLB(t)
	lb, _ := le.provider(t, "")
	svc := service(18320, le.port)
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 18321, NodePort: int32(le.port)})
	svc.Spec.LoadBalancerSourceRanges = []string{"127.0.0.2/32"}
	st, _ := le.ensure(t, lb, svc, le.nodes)
	reach := func(port int, from string) bool {
		_, c, err := minicloudtest.DialTCP(addr(st, port), from)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	for _, p := range []int{18320, 18321} {
		if !reach(p, "127.0.0.2") || reach(p, "127.0.0.3") {
			t.Errorf("port %d with 127.0.0.2/32: from .2 %v, from .3 %v", p, reach(p, "127.0.0.2"), reach(p, "127.0.0.3"))
		}
	}
	svc.Spec.LoadBalancerSourceRanges = []string{"127.0.0.3/32"}
	if _, retries := le.ensure(t, lb, svc, le.nodes); retries < 2 {
		t.Errorf("%d retries to change two listeners, want one per listener", retries)
	}
	for _, p := range []int{18320, 18321} {
		if reach(p, "127.0.0.2") || !reach(p, "127.0.0.3") {
			t.Errorf("port %d with 127.0.0.3/32: from .2 %v, from .3 %v", p, reach(p, "127.0.0.2"), reach(p, "127.0.0.3"))
		}
	}
	_, ls, _ := le.octaviaLB(t)
	for _, l := range ls {
		if !slices.Equal(l.AllowedCIDRs, []string{"127.0.0.3/32"}) {
			t.Errorf("listener %d allowed_cidrs %v", l.ProtocolPort, l.AllowedCIDRs)
		}
	}
	svc.Spec.LoadBalancerSourceRanges = nil
	le.ensure(t, lb, svc, le.nodes)
	if !reach(18320, "127.0.0.2") || !reach(18321, "127.0.0.3") {
		t.Error("cleared source ranges still refuse a source")
	}
}

// TestHealthMonitorLocal: with create-monitor and externalTrafficPolicy
// Local the pool's monitor is HTTP GET /healthz on the health check node
// port (the members' monitor_port), with the monitor-* settings; a node
// whose /healthz fails gets no traffic. Back to Cluster, the monitor is
// TCP on the members' port again.
func TestHealthMonitorLocal(t *testing.T) {
	le := startLB(t)
	lb, _ := le.provider(t, "create-monitor = true\nmonitor-delay = 1s\nmonitor-timeout = 1s\nmonitor-max-retries = 2\nmonitor-max-retries-down = 2\n")
	ctx := context.Background()
	svc := service(18330, le.port)
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = int32(le.healthPort)
	st, _ := le.ensure(t, lb, svc, le.nodes)
	lc := le.octavia(t)
	_, _, ps := le.octaviaLB(t)
	m, err := monitors.Get(ctx, lc, ps[0].MonitorID).Extract()
	if err != nil || m.Type != "HTTP" || m.URLPath != "/healthz" || m.Delay != 1 || m.MaxRetries != 2 || m.MaxRetriesDown != 2 {
		t.Fatalf("monitor %+v, %v", m, err)
	}
	pages, _ := pools.ListMembers(lc, ps[0].ID, pools.ListMembersOpts{}).AllPages(ctx)
	ms, _ := pools.ExtractMembers(pages)
	for _, mb := range ms {
		if mb.MonitorPort != le.healthPort || mb.ProtocolPort != le.port || mb.Name == "" {
			t.Errorf("member %+v: want monitor_port %d", mb, le.healthPort)
		}
	}
	le.backends[2].SetHealthy(false)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		c := minicloudtest.CountTCP(t, addr(st, 18330), 6)
		return c["n3"] == 0 && c["n1"] > 0 && c["n2"] > 0, nil
	})
	if err != nil {
		t.Fatalf("n3's /healthz fails, yet it gets traffic: %v", err)
	}

	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	svc.Spec.HealthCheckNodePort = 0
	le.ensure(t, lb, svc, le.nodes)
	_, _, ps = le.octaviaLB(t)
	if m, err = monitors.Get(ctx, lc, ps[0].MonitorID).Extract(); err != nil || m.Type != "TCP" {
		t.Errorf("monitor after Cluster: %+v, %v", m, err)
	}
	pages, _ = pools.ListMembers(lc, ps[0].ID, pools.ListMembersOpts{}).AllPages(ctx)
	ms, _ = pools.ExtractMembers(pages)
	for _, mb := range ms {
		if mb.MonitorPort != 0 {
			t.Errorf("member %+v keeps a monitor_port", mb)
		}
	}
	// Without create-monitor the monitor goes.
	lb2, _ := le.provider(t, "")
	le.ensure(t, lb2, svc, le.nodes)
	if _, _, ps = le.octaviaLB(t); ps[0].MonitorID != "" {
		t.Errorf("monitor %s kept without create-monitor", ps[0].MonitorID)
	}
}

// TestLBMethod: lb-method is the pools' lb_algorithm; an algorithm the
// cloud refuses is an error wrapping ErrUnsupported that names the key,
// whether at the create or at a change.
func TestLBMethod(t *testing.T) {
	le := startLB(t)
	ctx := context.Background()
	svc := service(18340, le.port)
	bad, p := le.provider(t, "lb-method = LEAST_CONNECTIONS\n")
	_, err := bad.EnsureLoadBalancer(ctx, "kubernetes", svc, le.nodes)
	if !errors.Is(err, openstack.ErrUnsupported) || !strings.Contains(err.Error(), "[LoadBalancer] lb-method") || !strings.Contains(err.Error(), "lb_algorithm") {
		t.Fatalf("create with LEAST_CONNECTIONS: %v; want ErrUnsupported naming [LoadBalancer] lb-method", err)
	}
	if refs, err := p.ListLoadBalancers(ctx, "kubernetes"); err != nil || len(refs) != 0 {
		t.Errorf("a refused create left %+v, %v", refs, err)
	}
	good, _ := le.provider(t, "lb-method = ROUND_ROBIN\n")
	le.ensure(t, good, svc, le.nodes)
	if _, _, ps := le.octaviaLB(t); ps[0].LBMethod != "ROUND_ROBIN" {
		t.Errorf("lb_algorithm %s", ps[0].LBMethod)
	}
	src, _ := le.provider(t, "lb-method = SOURCE_IP\n")
	_, err = src.EnsureLoadBalancer(ctx, "kubernetes", svc, le.nodes)
	if !errors.Is(err, openstack.ErrUnsupported) || !strings.Contains(err.Error(), "[LoadBalancer] lb-method") {
		t.Errorf("changing to SOURCE_IP: %v; want ErrUnsupported naming [LoadBalancer] lb-method", err)
	}
}

// TestUnsupportedService: what the provider cannot do is an error wrapping
// ErrUnsupported that names the field and the Service, before any call.
func TestUnsupportedService(t *testing.T) {
	le := startLB(t)
	lb, _ := le.provider(t, "")
	for _, tc := range []struct {
		field string
		edit  func(*v1.Service)
	}{
		{"spec.ports[0].protocol", func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }},
		{"spec.loadBalancerIP", func(s *v1.Service) { s.Spec.LoadBalancerIP = "192.0.2.1" }},
		{"spec.ports[0].nodePort", func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }},
		{"spec.sessionAffinity", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }},
	} {
		svc := service(18350, le.port)
		tc.edit(svc)
		_, err := lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, le.nodes)
		if !errors.Is(err, openstack.ErrUnsupported) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v; want ErrUnsupported naming it", tc.field, err)
		}
	}
}

// TestCascadeDeleteFalse: with cascade-delete = false the pools and
// listeners are deleted one per call before the load balancer, which is
// then deleted without cascade.
func TestCascadeDeleteFalse(t *testing.T) {
	le := startLB(t)
	lb, _ := le.provider(t, "cascade-delete = false\n")
	ctx := context.Background()
	svc := service(18360, le.port)
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 18361, NodePort: int32(le.port)})
	le.ensure(t, lb, svc, le.nodes)
	if err := le.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc)
		le.clk.advance(pending)
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	le.gone(t, lb, svc)
	if p, l, d := le.requests(t, "DELETE /load-balancer/v2.0/lbaas/pools/{id}"), le.requests(t, "DELETE /load-balancer/v2.0/lbaas/listeners/{id}"),
		le.requests(t, "DELETE /load-balancer/v2.0/lbaas/loadbalancers/{id}"); p != 2 || l != 2 || d != 1 {
		t.Errorf("deletes: %d pools, %d listeners, %d load balancers; want 2, 2, 1", p, l, d)
	}
}

// TestErrorReplaced: a load balancer in ERROR is deleted and created
// again; its floating IP is reused (same address, still carrying traffic),
// nothing leaks, and another cluster's floating IP is never touched, even
// by the final delete.
func TestErrorReplaced(t *testing.T) {
	le := startLB(t)
	lb, _ := le.provider(t, "floating-network-id = "+le.pubNet+"\n")
	ctx := context.Background()
	nc := le.neutron(t)
	foreign, err := floatingips.Create(ctx, nc, floatingips.CreateOpts{FloatingNetworkID: le.pubNet, Description: "Floating IP for kube_service_other_default_web"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	svc := service(18370, le.port)
	st, _ := le.ensure(t, lb, svc, le.nodes)
	old, _, _ := le.octaviaLB(t)
	if err := le.mc.OpenStack.SetError(old.ID); err != nil {
		t.Fatal(err)
	}
	st2, retries := le.ensure(t, lb, svc, le.nodes)
	now, _, _ := le.octaviaLB(t)
	if retries < 2 || now.ID == old.ID || st2.Ingress[0].IP != st.Ingress[0].IP {
		t.Fatalf("after ERROR: load balancer %s (was %s), status %v (was %v)", now.ID, old.ID, st2, st)
	}
	if c := minicloudtest.CountTCP(t, addr(st2, 18370), 3); c["n1"]+c["n2"]+c["n3"] != 3 {
		t.Errorf("traffic through the reused floating IP: %v", c)
	}
	pages, _ := floatingips.List(nc, floatingips.ListOpts{}).AllPages(ctx)
	all, _ := floatingips.ExtractFloatingIPs(pages)
	if len(all) != 2 {
		t.Errorf("floating IPs after the replacement: %+v; want ours and the foreign one", all)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	pages, _ = floatingips.List(nc, floatingips.ListOpts{}).AllPages(ctx)
	all, _ = floatingips.ExtractFloatingIPs(pages)
	if len(all) != 1 || all[0].ID != foreign.ID {
		t.Errorf("floating IPs after the delete: %+v; want the foreign one only", all)
	}
}
