package minicloud_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// lbFixture is a cloud with two instances, each running a backend.
type lbFixture struct {
	mc   *minicloudtest.Cloud
	a, b *api.Instance
	ba   *minicloudtest.Backend
	bb   *minicloudtest.Backend
	port int // the backends' port
}

func newLBFixture(t *testing.T, tcp, udp bool, healthPort int) *lbFixture {
	t.Helper()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 50 * time.Millisecond})
	f := &lbFixture{mc: mc}
	f.a = newInstance(t, mc.Client, "a", nil)
	f.b = newInstance(t, mc.Client, "b", nil)
	f.ba = minicloudtest.StartBackend(t, "a", f.a.PrivateIP, minicloudtest.BackendOptions{TCP: tcp, UDP: udp, HealthPort: healthPort})
	f.port = f.ba.Port
	f.bb = minicloudtest.StartBackend(t, "b", f.b.PrivateIP, minicloudtest.BackendOptions{Port: f.port, TCP: tcp, UDP: udp, HealthPort: healthPort})
	return f
}

func (f *lbFixture) create(t *testing.T, spec api.LoadBalancerSpec) *api.LoadBalancer {
	t.Helper()
	if spec.Targets == nil {
		spec.Targets = []api.Target{{InstanceID: f.a.ID}, {InstanceID: f.b.ID}}
	}
	lb, err := f.mc.Client.CreateLoadBalancer(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return f.mc.WaitLoadBalancer(t, lb.ID, minicloudtest.Active)
}

func vipAddr(lb *api.LoadBalancer, port int) string {
	return net.JoinHostPort(lb.VIP, strconv.Itoa(port))
}

// waitHealth waits until the target with ip has state.
func waitHealth(t *testing.T, mc *minicloudtest.Cloud, id, ip, state string) {
	t.Helper()
	mc.WaitLoadBalancer(t, id, func(lb *api.LoadBalancer) bool {
		for _, th := range lb.TargetHealth {
			if th.IP == ip {
				return th.State == state
			}
		}
		return false
	})
}

func TestTCPTrafficThroughVIP(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	lb := f.create(t, api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{{Protocol: "TCP", Port: 18080, TargetPort: f.port}}})
	got := minicloudtest.CountTCP(t, vipAddr(lb, 18080), 6)
	if got["a"] == 0 || got["b"] == 0 || got["a"]+got["b"] != 6 {
		t.Fatalf("connections per backend %v, want both used", got)
	}
	// The proxied connection carries data both ways.
	_, c, err := minicloudtest.DialTCP(vipAddr(lb, 18080), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello\n" {
		t.Fatalf("echo through VIP: %q, %v", buf, err)
	}
}

func TestUDPTrafficThroughVIP(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, false, true, 0)
	lb := f.create(t, api.LoadBalancerSpec{Name: "dns", Listeners: []api.Listener{{Protocol: "UDP", Port: 15353, TargetPort: f.port}}})
	got := map[string]int{}
	for i := range 4 {
		// A fresh socket per question: a new session, spread round-robin.
		answer, err := minicloudtest.AskUDP(vipAddr(lb, 15353), "q"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		name, payload, _ := strings.Cut(answer, ":")
		if payload != "q"+strconv.Itoa(i) {
			t.Fatalf("answer %q to q%d", answer, i)
		}
		got[name]++
	}
	if got["a"] == 0 || got["b"] == 0 {
		t.Fatalf("sessions per backend %v, want both used", got)
	}
}

func TestUDPSourceRanges(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, false, true, 0)
	lb := f.create(t, api.LoadBalancerSpec{Name: "dns", Listeners: []api.Listener{{Protocol: "UDP", Port: 15354, TargetPort: f.port}},
		SourceRanges: []string{"127.0.0.2/32"}})
	if answer, err := minicloudtest.AskUDPFrom(vipAddr(lb, 15354), "127.0.0.2", "q", 3*time.Second); err != nil || !strings.HasSuffix(answer, ":q") {
		t.Fatalf("allowed source: %q, %v", answer, err)
	}
	if answer, err := minicloudtest.AskUDPFrom(vipAddr(lb, 15354), "127.0.0.3", "q", 500*time.Millisecond); err == nil {
		t.Fatalf("a source outside source_ranges got %q", answer)
	}
}

func TestHealthCheckTakesBackendOutAndIn(t *testing.T) {
	t.Parallel()
	const healthPort = 10256
	f := newLBFixture(t, true, false, healthPort)
	lb := f.create(t, api.LoadBalancerSpec{
		Name:        "web",
		Listeners:   []api.Listener{{Protocol: "TCP", Port: 18080, TargetPort: f.port}},
		HealthCheck: &api.HealthCheck{Protocol: "HTTP", Port: healthPort, Path: "/healthz", IntervalSeconds: 1},
	})
	c := f.mc.Client
	waitHealth(t, f.mc, lb.ID, f.a.PrivateIP, api.HealthHealthy)
	waitHealth(t, f.mc, lb.ID, f.b.PrivateIP, api.HealthHealthy)

	f.ba.SetHealthy(false)
	waitHealth(t, f.mc, lb.ID, f.a.PrivateIP, api.HealthUnhealthy)
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18080), 4); got["b"] != 4 {
		t.Fatalf("with a unhealthy, connections went to %v; want all to b", got)
	}
	f.ba.SetHealthy(true)
	waitHealth(t, f.mc, lb.ID, f.a.PrivateIP, api.HealthHealthy)
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18080), 4); got["a"] == 0 {
		t.Fatalf("a healthy again but got no connections: %v", got)
	}

	// A stopped instance gets no traffic, without waiting for probes.
	if _, err := c.StopInstance(context.Background(), f.b.ID); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetLoadBalancer(context.Background(), lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if th := got.TargetHealth[1]; th.State != api.HealthUnhealthy || !strings.Contains(th.Reason, "stopped") {
		t.Fatalf("stopped instance health %+v", th)
	}
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18080), 3); got["a"] != 3 {
		t.Fatalf("with b stopped, connections went to %v", got)
	}
}

func TestTCPHealthCheckDeadBackend(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	// TCP health check on the target port (port 0 = the first listener's).
	lb := f.create(t, api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{{Protocol: "TCP", Port: 18080, TargetPort: f.port}},
		HealthCheck: &api.HealthCheck{Protocol: "TCP", IntervalSeconds: 1}})
	waitHealth(t, f.mc, lb.ID, f.a.PrivateIP, api.HealthHealthy)

	f.ba.StopTCP()
	waitHealth(t, f.mc, lb.ID, f.a.PrivateIP, api.HealthUnhealthy)
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18080), 4); got["b"] != 4 {
		t.Fatalf("with a dead, connections went to %v", got)
	}
	f.ba.RestartTCP()
	waitHealth(t, f.mc, lb.ID, f.a.PrivateIP, api.HealthHealthy)
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18080), 4); got["a"] == 0 {
		t.Fatalf("a back but got no connections: %v", got)
	}
}

func TestSourceRanges(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	lb := f.create(t, api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{{Protocol: "TCP", Port: 18080, TargetPort: f.port}},
		SourceRanges: []string{"127.0.0.2/32"}})
	name, c, err := minicloudtest.DialTCP(vipAddr(lb, 18080), "127.0.0.2")
	if err != nil {
		t.Fatalf("allowed source: %v", err)
	}
	c.Close()
	if name != "a" && name != "b" {
		t.Fatalf("answer %q", name)
	}
	if _, _, err := minicloudtest.DialTCP(vipAddr(lb, 18080), "127.0.0.3"); err == nil {
		t.Fatal("a source outside source_ranges got an answer")
	}
	// Opening the range lets it in.
	if _, err := f.mc.Client.UpdateLoadBalancer(context.Background(), lb.ID, api.LoadBalancerSpec{
		Listeners: lb.Listeners, Targets: lb.Targets, SourceRanges: []string{"127.0.0.0/30"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, c, err := minicloudtest.DialTCP(vipAddr(lb, 18080), "127.0.0.3"); err != nil {
		t.Fatalf("after widening source ranges: %v", err)
	} else {
		c.Close()
	}
}

func TestUpdateAndDeleteLeaveOtherLBsAlone(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	ctx := context.Background()
	x := f.create(t, api.LoadBalancerSpec{Name: "x", Listeners: []api.Listener{{Protocol: "TCP", Port: 18081, TargetPort: f.port}}})
	y := f.create(t, api.LoadBalancerSpec{Name: "y", Listeners: []api.Listener{{Protocol: "TCP", Port: 18081, TargetPort: f.port}}})
	// A long-lived connection through y.
	_, yc, err := minicloudtest.DialTCP(vipAddr(y, 18081), "")
	if err != nil {
		t.Fatal(err)
	}
	defer yc.Close()
	echo := func() {
		t.Helper()
		yc.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := yc.Write([]byte("ping\n")); err != nil {
			t.Fatalf("connection through y: %v", err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(yc, buf); err != nil || string(buf) != "ping\n" {
			t.Fatalf("connection through y: %q, %v", buf, err)
		}
	}
	echo()

	// Move x from port 18081 to 18082, only to b.
	if _, err := f.mc.Client.UpdateLoadBalancer(ctx, x.ID, api.LoadBalancerSpec{
		Listeners: []api.Listener{{Protocol: "TCP", Port: 18082, TargetPort: f.port}},
		Targets:   []api.Target{{InstanceID: f.b.ID}},
	}); err != nil {
		t.Fatal(err)
	}
	if !minicloudtest.Refused(vipAddr(x, 18081)) {
		t.Error("x still listens on its removed port")
	}
	if got := minicloudtest.CountTCP(t, vipAddr(x, 18082), 3); got["b"] != 3 {
		t.Errorf("x on its new port, only target b: %v", got)
	}
	echo()

	if err := f.mc.Client.DeleteLoadBalancer(ctx, x.ID); err != nil {
		t.Fatal(err)
	}
	if !minicloudtest.Refused(vipAddr(x, 18082)) {
		t.Error("deleted x still listens")
	}
	echo()
	if got := minicloudtest.CountTCP(t, vipAddr(y, 18081), 2); got["a"]+got["b"] != 2 {
		t.Errorf("y after x was deleted: %v", got)
	}
}

// A load balancer that a reader already finds gone carries no traffic: the
// data plane stops before the deletion is visible. A reader polls while the
// deletion runs and dials the VIP the moment it sees 404.
func TestDeletedLBRefusesOnceGone(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	ctx := context.Background()
	for i := range 5 {
		lb := f.create(t, api.LoadBalancerSpec{Name: "gone-" + strconv.Itoa(i), Listeners: []api.Listener{{Protocol: "TCP", Port: 18083, TargetPort: f.port}}})
		seen := make(chan bool, 1)
		go func() {
			// Ends with the test if the deletion fails.
			for t.Context().Err() == nil {
				if _, err := f.mc.Client.GetLoadBalancer(t.Context(), lb.ID); client.IsNotFound(err) {
					seen <- minicloudtest.Refused(vipAddr(lb, 18083))
					return
				}
			}
		}()
		if err := f.mc.Client.DeleteLoadBalancer(ctx, lb.ID); err != nil {
			t.Fatal(err)
		}
		if !<-seen {
			t.Fatalf("load balancer %s: its VIP accepted a connection after a read found it gone", lb.ID)
		}
	}
}

// TestListenerTargetsAndRanges: a listener's own targets and source ranges
// apply to it alone; the other listener keeps the load balancer's.
func TestListenerTargetsAndRanges(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	lb := f.create(t, api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{
		{Protocol: "TCP", Port: 18080, TargetPort: f.port},
		{Protocol: "TCP", Port: 18081, TargetPort: f.port, Targets: []api.Target{{InstanceID: f.b.ID}}, SourceRanges: []string{"127.0.0.2/32"}},
	}})
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18080), 6); got["a"] == 0 || got["b"] == 0 {
		t.Fatalf("listener 18080: connections per backend %v, want both", got)
	}
	for range 4 {
		name, c, err := minicloudtest.DialTCP(vipAddr(lb, 18081), "127.0.0.2")
		if err != nil {
			t.Fatalf("listener 18081 from an allowed source: %v", err)
		}
		c.Close()
		if name != "b" {
			t.Fatalf("listener 18081 answered by %q, want only b", name)
		}
	}
	if _, _, err := minicloudtest.DialTCP(vipAddr(lb, 18081), "127.0.0.3"); err == nil {
		t.Fatal("listener 18081: a source outside its source_ranges got an answer")
	}
	if _, c, err := minicloudtest.DialTCP(vipAddr(lb, 18080), "127.0.0.3"); err != nil {
		t.Fatalf("listener 18080 has no source ranges, yet: %v", err)
	} else {
		c.Close()
	}
	got, err := f.mc.Client.GetLoadBalancer(context.Background(), lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Listeners[1].Targets) != 1 || got.Listeners[1].Targets[0].InstanceID != f.b.ID {
		t.Fatalf("listener targets as stored: %+v", got.Listeners[1])
	}
}

// TestLoadBalancerWithoutListeners: it gets a VIP, becomes active and binds
// nothing until a listener is added.
func TestLoadBalancerWithoutListeners(t *testing.T) {
	t.Parallel()
	f := newLBFixture(t, true, false, 0)
	lb := f.create(t, api.LoadBalancerSpec{Name: "bare", Listeners: []api.Listener{}})
	if lb.VIP == "" || len(lb.Listeners) != 0 {
		t.Fatalf("bare load balancer: %+v", lb)
	}
	if _, _, err := minicloudtest.DialTCP(vipAddr(lb, 18080), ""); err == nil {
		t.Fatal("a load balancer without listeners answered on 18080")
	}
	if _, err := f.mc.Client.UpdateLoadBalancer(context.Background(), lb.ID, api.LoadBalancerSpec{
		Listeners: []api.Listener{{Protocol: "TCP", Port: 18080, TargetPort: f.port}}, Targets: lb.Targets,
	}); err != nil {
		t.Fatal(err)
	}
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18080), 4); got["a"]+got["b"] != 4 {
		t.Fatalf("after adding a listener: %v", got)
	}
}
