package minicloud

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/annotations"
)

// theLB returns the cloud's only load balancer.
func (f *lbFixture) theLB(t *testing.T) api.LoadBalancer {
	t.Helper()
	lbs, err := f.mc.Client.ListLoadBalancers(context.Background(), client.ListOptions{})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("cloud has load balancers %+v (%v), want exactly one", lbs, err)
	}
	return lbs[0]
}

// localService is the fixture's Service with externalTrafficPolicy: Local,
// so that the load balancer probes the backends' HTTP health endpoints
// (which record the probes), with the annotations ann.
func (f *lbFixture) localService(ann map[string]string) *v1.Service {
	svc := f.service(8080)
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = f.healthPort
	svc.Annotations = ann
	return svc
}

// waitProbes waits until be has recorded n health probes that match ok.
func waitProbes(t *testing.T, be *minicloudtest.Backend, n int, ok func(minicloudtest.Probe) bool) []minicloudtest.Probe {
	t.Helper()
	var got []minicloudtest.Probe
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		got = slices.DeleteFunc(be.Probes(), func(p minicloudtest.Probe) bool { return !ok(p) })
		return len(got) >= n, nil
	})
	if err != nil {
		t.Fatalf("backend %s: %d matching health probes, want %d", be.Name, len(got), n)
	}
	return got
}

// TestAnnotationHealthCheckInterval: the interval reaches the cloud and
// spaces the probes (minicloud's default is 5s; the annotation asks for 7s).
func TestAnnotationHealthCheckInterval(t *testing.T) {
	t.Parallel() // waits out real health-check intervals and timeouts
	f := newLBFixture(t)
	f.ensure(t, cluster, f.localService(map[string]string{annotations.LBHealthCheckInterval.Name: "6500ms"}), f.nodes)
	if hc := f.theLB(t).HealthCheck; hc == nil || hc.IntervalSeconds != 7 {
		t.Fatalf("health check %+v, want interval_seconds 7 (6.5s rounded up)", hc)
	}
	probes := waitProbes(t, f.backends[0], 3, func(minicloudtest.Probe) bool { return true })
	for i := 1; i < len(probes); i++ {
		// A lower bound only: a loaded machine delays probes, never hastens them.
		if gap := probes[i].At.Sub(probes[i-1].At); gap < 6*time.Second {
			t.Errorf("probes %d and %d of node-a %v apart, want the 7s interval", i-1, i, gap)
		}
	}
}

// TestAnnotationHealthCheckTimeout: the timeout reaches the cloud, a
// backend whose health endpoint hangs is held for that long (minicloud's
// default is 2s) and then taken out of rotation.
func TestAnnotationHealthCheckTimeout(t *testing.T) {
	t.Parallel() // waits out real health-check intervals and timeouts
	f := newLBFixture(t)
	f.backends[1].SetHanging(true)
	st := f.ensure(t, cluster, f.localService(map[string]string{annotations.LBHealthCheckTimeout.Name: "4s"}), f.nodes)
	if hc := f.theLB(t).HealthCheck; hc == nil || hc.TimeoutSeconds != 4 {
		t.Fatalf("health check %+v, want timeout_seconds 4", hc)
	}
	hung := waitProbes(t, f.backends[1], 1, func(p minicloudtest.Probe) bool { return p.Hung > 0 })
	if hung[0].Hung < 3500*time.Millisecond {
		t.Errorf("the load balancer gave up a hanging probe after %v, want the 4s timeout", hung[0].Hung)
	}
	waitBackends(t, net.JoinHostPort(st.Ingress[0].IP, "8080"), "node-a")
}

// TestAnnotationHealthCheckUnhealthyThreshold: the threshold reaches the
// cloud, and a backend whose health endpoint starts failing leaves rotation
// only after that many failed probes (minicloud's default is 2).
func TestAnnotationHealthCheckUnhealthyThreshold(t *testing.T) {
	t.Parallel() // waits out real health-check intervals and timeouts
	f := newLBFixture(t)
	st := f.ensure(t, cluster, f.localService(map[string]string{
		annotations.LBHealthCheckInterval.Name:           "1s",
		annotations.LBHealthCheckTimeout.Name:            "1s",
		annotations.LBHealthCheckUnhealthyThreshold.Name: "4",
	}), f.nodes)
	if hc := f.theLB(t).HealthCheck; hc == nil || hc.UnhealthyThreshold != 4 || hc.IntervalSeconds != 1 || hc.TimeoutSeconds != 1 {
		t.Fatalf("health check %+v, want unhealthy_threshold 4, interval and timeout 1s", hc)
	}
	addr := net.JoinHostPort(st.Ingress[0].IP, "8080")
	waitProbes(t, f.backends[1], 1, func(p minicloudtest.Probe) bool { return p.Status == 200 })
	waitBackends(t, addr, "node-a", "node-b")
	f.backends[1].SetHealthy(false)
	waitBackends(t, addr, "node-a")
	// Counted after the fact: the backend logs a probe before answering it,
	// so when node-b is out of rotation it has answered every probe that
	// took it out.
	failed := waitProbes(t, f.backends[1], 1, func(p minicloudtest.Probe) bool { return p.Status == 503 })
	if len(failed) < 4 {
		t.Errorf("node-b left rotation after %d failed probes, want 4", len(failed))
	}
}

// TestAnnotationProxyProtocol: with the annotation the cloud sends a PROXY
// v2 header carrying the client's address to the backends and the status
// says ipMode Proxy; without it, backends expecting the header get none.
func TestAnnotationProxyProtocol(t *testing.T) {
	t.Parallel() // waits out real health-check intervals and timeouts
	f := newLBFixtureWith(t, minicloudtest.BackendOptions{ProxyProtocol: true})
	svc := f.service(8080)
	svc.Annotations = map[string]string{annotations.LBProxyProtocol.Name: "true"}
	st := f.ensure(t, cluster, svc, f.nodes)
	if !f.theLB(t).ProxyProtocol {
		t.Fatal("the cloud's load balancer has proxy_protocol false")
	}
	if mode := st.Ingress[0].IPMode; mode == nil || *mode != v1.LoadBalancerIPModeProxy {
		t.Errorf("ingress ipMode %v, want Proxy", mode)
	}
	addr := net.JoinHostPort(st.Ingress[0].IP, "8080")
	var name, local string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		n, c, err := minicloudtest.DialTCP(addr, "127.0.0.2")
		if err != nil {
			return false, nil
		}
		defer c.Close()
		name, local = n, c.LocalAddr().String()
		return true, nil
	})
	if err != nil {
		t.Fatalf("no answer through %s from 127.0.0.2", addr)
	}
	be := f.backends[slices.IndexFunc(f.backends, func(b *minicloudtest.Backend) bool { return b.Name == name })]
	if !slices.Contains(be.ProxyClients(), local) {
		t.Errorf("backend %s saw clients %v in PROXY headers, want %s", name, be.ProxyClients(), local)
	}

	svc.Annotations = nil
	st = f.ensure(t, cluster, svc, f.nodes)
	if f.theLB(t).ProxyProtocol {
		t.Error("proxy_protocol still true after the annotation was removed")
	}
	if mode := st.Ingress[0].IPMode; mode == nil || *mode != v1.LoadBalancerIPModeVIP {
		t.Errorf("ingress ipMode %v without the annotation, want VIP", mode)
	}
	if n, c, err := minicloudtest.DialTCP(addr, ""); err == nil {
		c.Close()
		t.Errorf("backend %s answered without a PROXY header", n)
	}
}

// TestAnnotationAlgorithm: source-ip reaches the cloud and sends every
// connection of one client to the same backend, where round robin (the
// default) spreads them.
func TestAnnotationAlgorithm(t *testing.T) {
	f := newLBFixture(t)
	svc := f.service(8080)
	st := f.ensure(t, cluster, svc, f.nodes)
	addr := net.JoinHostPort(st.Ingress[0].IP, "8080")
	waitBackends(t, addr, "node-a", "node-b")

	svc.Annotations = map[string]string{annotations.LBAlgorithm.Name: annotations.AlgorithmSourceIP}
	f.ensure(t, cluster, svc, f.nodes)
	if got := f.theLB(t).Algorithm; got != api.AlgorithmSourceIP {
		t.Fatalf("cloud's algorithm %q, want %q", got, api.AlgorithmSourceIP)
	}
	if got := minicloudtest.CountTCP(t, addr, 8); len(got) != 1 {
		t.Errorf("8 connections from one client reached %v, want one backend", got)
	}
}

// TestSessionAffinityClientIP: a Service with sessionAffinity: ClientIP
// gets source-ip without the annotation, so that one client reaches one
// node (kube-proxy keeps the affinity within a node only); the annotation
// still decides when set, and dropping the affinity goes back to round
// robin.
func TestSessionAffinityClientIP(t *testing.T) {
	f := newLBFixture(t)
	svc := f.service(8080)
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	st := f.ensure(t, cluster, svc, f.nodes)
	if got := f.theLB(t).Algorithm; got != api.AlgorithmSourceIP {
		t.Fatalf("cloud's algorithm %q with sessionAffinity ClientIP, want %q", got, api.AlgorithmSourceIP)
	}
	addr := net.JoinHostPort(st.Ingress[0].IP, "8080")
	if got := minicloudtest.CountTCP(t, addr, 8); len(got) != 1 {
		t.Errorf("8 connections from one client reached %v, want one backend", got)
	}

	svc.Annotations = map[string]string{annotations.LBAlgorithm.Name: annotations.AlgorithmRoundRobin}
	f.ensure(t, cluster, svc, f.nodes)
	if got := f.theLB(t).Algorithm; got == api.AlgorithmSourceIP {
		t.Errorf("cloud's algorithm %q with the annotation %s, want round robin", got, annotations.AlgorithmRoundRobin)
	}

	svc.Annotations = nil
	svc.Spec.SessionAffinity = v1.ServiceAffinityNone
	f.ensure(t, cluster, svc, f.nodes)
	if got := f.theLB(t).Algorithm; got == api.AlgorithmSourceIP {
		t.Errorf("cloud's algorithm %q without session affinity, want round robin", got)
	}
	waitBackends(t, addr, "node-a", "node-b")
}

// TestAnnotationIdleTimeout: the idle timeout reaches the cloud, and the
// load balancer closes a connection that stays silent that long.
func TestAnnotationIdleTimeout(t *testing.T) {
	t.Parallel() // waits out real health-check intervals and timeouts
	f := newLBFixture(t)
	svc := f.service(8080)
	svc.Annotations = map[string]string{annotations.LBIdleTimeout.Name: "1s"}
	st := f.ensure(t, cluster, svc, f.nodes)
	if got := f.theLB(t).IdleTimeoutSeconds; got != 1 {
		t.Fatalf("cloud's idle_timeout_seconds %d, want 1", got)
	}
	_, c, err := minicloudtest.DialTCP(net.JoinHostPort(st.Ingress[0].IP, "8080"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read on an idle connection: %v, want EOF (closed by the load balancer)", err)
	}
}

// TestAnnotationErrors: settings the provider cannot apply are errors
// naming the annotation, and nothing is created.
func TestAnnotationErrors(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	udp := f.service(53)
	udp.Spec.Ports[0].Protocol = v1.ProtocolUDP
	udp.Annotations = map[string]string{annotations.LBHealthCheckInterval.Name: "5s"}
	long := f.service(8080)
	long.Annotations = map[string]string{annotations.LBHealthCheckTimeout.Name: "10s"}
	bad := f.service(8080)
	bad.Annotations = map[string]string{annotations.LBAlgorithm.Name: "random"}
	for _, tc := range []struct {
		svc  *v1.Service
		want string
	}{
		{udp, "ensure load balancer for service default/web: annotation " + annotations.LBHealthCheckInterval.Name +
			": the Service has no health check (no TCP port and not externalTrafficPolicy: Local), so health-check settings are not supported by minicloud"},
		{long, "ensure load balancer for service default/web: annotation " + annotations.LBHealthCheckTimeout.Name +
			": 10s is longer than the health-check interval (5s, " + annotations.LBHealthCheckInterval.Name + ")"},
		{bad, "ensure load balancer for service default/web: invalid annotation " + annotations.LBAlgorithm.Name +
			`="random": not one of round-robin, source-ip`},
	} {
		_, err := f.lb.EnsureLoadBalancer(ctx, cluster, tc.svc, f.nodes)
		if err == nil || err.Error() != tc.want {
			t.Errorf("EnsureLoadBalancer(%v) = %v\nwant %s", tc.svc.Annotations, err, tc.want)
		}
	}
	if lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{}); err != nil || len(lbs) != 0 {
		t.Errorf("cloud has load balancers %+v (%v), want none", lbs, err)
	}
}
