package service

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// nodePortResponder stands in for kube-proxy and a backend pod on a node: it
// answers HTTP on ip:port with the node's name.
func nodePortResponder(t *testing.T, node, ip string, port int32) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	if err != nil {
		t.Fatalf("node %s: listen on its NodePort: %v", node, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, node) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// With minicloud: a LoadBalancer Service gets the VIP as ingress, and an HTTP
// request to it goes through minicloud's load balancer to the NodePort of a
// node's instance; deleting the Service deletes the load balancer.
func TestMinicloudLoadBalancer(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 300 * time.Millisecond})
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, clouds, Options{ClusterName: "mc-test"})

	// The NodePort is chosen here so that the responders listen before the
	// load balancer's first health probe.
	nodePort := h.createServiceWithFreeNodePort(t)
	for i := range 2 {
		inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: h.nodeName(i), Type: "mc.small", Zone: "mc-central-a"})
		if err != nil {
			t.Fatal(err)
		}
		nodePortResponder(t, h.nodeName(i), inst.PrivateIP, nodePort)
		h.createNodes(i, i+1, func(n *v1.Node) { n.Spec.ProviderID = mcprovider.ProviderID(inst.ID) })
	}
	h.updateService("web", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeLoadBalancer })

	svc := h.waitIngress("web", 30*time.Second)
	ing := svc.Status.LoadBalancer.Ingress[0]
	lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: string(svc.UID)}})
	if err != nil || len(lbs) != 1 || lbs[0].VIP != ing.IP || lbs[0].Tags[mcprovider.TagCluster] != "mc-test" {
		t.Fatalf("cloud load balancers for the Service: %+v (%v); want one with VIP %s in cluster mc-test", lbs, err, ing.IP)
	}
	if len(lbs[0].Targets) != 2 {
		t.Errorf("targets %+v, want both node instances", lbs[0].Targets)
	}

	// A request through the VIP reaches a node; over a few, both.
	// A fresh connection per request: the load balancer balances connections.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	seen := map[string]bool{}
	h.eventually(20*time.Second, "HTTP through the VIP reaching both nodes", func() (bool, error) {
		resp, err := hc.Get("http://" + net.JoinHostPort(ing.IP, "80") + "/")
		if err != nil {
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen[strings.TrimSpace(string(body))] = true
		return seen[h.nodeName(0)] && seen[h.nodeName(1)], nil
	})

	if err := h.cs.CoreV1().Services(h.ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually(20*time.Second, "load balancer deleted", func() (bool, error) {
		lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: string(svc.UID)}})
		return err == nil && len(lbs) == 0, nil
	})
	if !minicloudtest.Refused(net.JoinHostPort(ing.IP, "80")) {
		t.Error("the VIP still accepts connections")
	}
}

// createServiceWithFreeNodePort creates Service "web" as type NodePort with a
// NodePort it picks, retrying while the port is allocated, and returns it.
func (h *harness) createServiceWithFreeNodePort(t *testing.T) int32 {
	t.Helper()
	var lastErr error
	for range 20 {
		port := int32(30000 + rand.IntN(2768))
		svc := lbService("web", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = port
		})
		if _, lastErr = h.cs.CoreV1().Services(h.ns).Create(h.ctx, svc, metav1.CreateOptions{}); lastErr == nil {
			return port
		}
	}
	t.Fatalf("create service web with a free NodePort: %v", lastErr)
	return 0
}

// A machine that is gone while its Node is kept (as the node lifecycle
// controller's deletion guard keeps it for minutes) affects no load balancer:
// a Service created meanwhile gets its load balancer with the other nodes,
// and once an instance listing shows the machine gone, existing load
// balancers drop it although no Node changed.
func TestMinicloudGoneMachineLeavesBackends(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond})
	p := cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client), cloud.WithInstanceCacheFreshness(100*time.Millisecond))
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, cloud.Single(p), Options{ClusterName: "mc-gone-test"})
	var ids []string
	for i := range 3 {
		inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: h.nodeName(i), Type: "mc.small", Zone: "mc-central-a"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
		h.createNodes(i, i+1, func(n *v1.Node) { n.Spec.ProviderID = mcprovider.ProviderID(inst.ID) })
	}
	targets := func(name string) []string { return lbTargets(ctx, mc, string(h.getService(name).UID)) }
	h.createService(lbService("web", func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }))
	h.waitIngress("web", 30*time.Second)
	if got := targets("web"); !slices.Equal(got, ids) {
		t.Fatalf("web's targets = %v, want %v", got, ids)
	}

	// The third machine goes; its Node stays.
	if err := mc.Client.DeleteInstance(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	h.createService(lbService("repro"))
	h.waitIngress("repro", 30*time.Second)
	if got := targets("repro"); !slices.Equal(got, ids[:2]) {
		t.Errorf("repro's targets = %v, want %v", got, ids[:2])
	}
	if c := h.getService("repro"); !slices.ContainsFunc(c.Status.Conditions, func(c metav1.Condition) bool {
		return c.Type == ConditionLoadBalancerReady && c.Status == metav1.ConditionTrue
	}) {
		t.Errorf("repro's conditions = %+v, want LoadBalancerReady True", c.Status.Conditions)
	}

	// An instance listing (the node lifecycle controller makes one every pass
	// while a Node is NotReady) shows the machine gone: web drops it.
	gone, err := h.cs.CoreV1().Nodes().Get(ctx, h.nodeName(2), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually(30*time.Second, "a listing that shows the machine gone", func() (bool, error) {
		_, _, err := p.ListInstances(ctx)
		return err == nil && p.KnownGone(gone), nil
	})
	h.eventually(30*time.Second, "web's load balancer without the gone machine", func() (bool, error) {
		return slices.Equal(targets("web"), ids[:2]), nil
	})
	if _, err := h.cs.CoreV1().Nodes().Get(ctx, h.nodeName(2), metav1.GetOptions{}); err != nil {
		t.Errorf("the Node of the gone machine: %v; the service controller must not touch Nodes", err)
	}
}

// A Service whose load balancer failed during a cloud outage is synced again
// as soon as the provider answers again, not when its backoff ends.
func TestMinicloudServicesHealWhenTheCloudRecovers(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond})
	p := cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client),
		cloud.WithInstanceCacheFreshness(time.Millisecond), cloud.WithBudget(cloud.BudgetConfig{MaxRetries: -1}))
	// A backoff far beyond the test's deadlines: only the recovery can retry.
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, cloud.Single(p),
		Options{ClusterName: "mc-heal-test", RetryBaseDelay: time.Hour, RetryMaxDelay: time.Hour})
	inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: h.nodeName(0), Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	h.createNodes(0, 1, func(n *v1.Node) { n.Spec.ProviderID = mcprovider.ProviderID(inst.ID) })

	if _, err := mc.Client.SetFaults(ctx, api.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	h.createService(lbService("web"))
	h.waitCondition("web", ReasonCloudError, 30*time.Second)
	// The outage: other controllers' calls fail too (the lifecycle
	// controller lists instances every few seconds).
	for range 3 {
		if _, _, err := p.ListInstances(ctx); err == nil {
			t.Fatal("a listing succeeded during the outage")
		}
	}
	if _, err := mc.Client.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.ListInstances(ctx); err != nil {
		t.Fatalf("listing after the outage: %v", err)
	}
	h.waitIngress("web", 30*time.Second)
}

// A node joining changes the load balancer's targets without a write to the
// Service (its Ready condition records the configuration, not the backends);
// a manager started after nodes changed while none ran adopts the load
// balancer without an Ensure and still brings its targets up to date.
func TestMinicloudBackendsWithoutServiceWrites(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond})
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	ns := testenv.Get(t).Namespace(t)
	opts := Options{ClusterName: "mc-backends-test", NodeUpdateWindow: 200 * time.Millisecond}
	h, stop := startIn(t, ns, nil, clouds, opts)
	nodes := &mcNodes{t: t, h: h, mc: mc, ids: map[int]string{}}
	addNode, want := nodes.add, nodes.want
	targets := func(uid string) []string { return lbTargets(ctx, mc, uid) }
	addNode(0)
	addNode(1)
	h.createService(lbService("web", func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }))
	h.waitCondition("web", ReasonReady, 30*time.Second)
	ready := h.getService("web")
	uid := string(ready.UID)
	if got := targets(uid); !slices.Equal(got, want(0, 1)) {
		t.Fatalf("targets %v, want %v", got, want(0, 1))
	}

	// (a) Two nodes join, one after the other: the targets follow, the
	// Service is not written. Backend passes run one at a time, each to the
	// end of its Services' condition writes: once the second node is a
	// target, the first node's pass has written whatever it writes.
	addNode(2)
	h.eventually(30*time.Second, "the first joining node's machine among the targets", func() (bool, error) {
		return slices.Equal(targets(uid), want(0, 1, 2)), nil
	})
	addNode(3)
	h.eventually(30*time.Second, "the second joining node's machine among the targets", func() (bool, error) {
		return slices.Equal(targets(uid), want(0, 1, 2, 3)), nil
	})
	if got := h.getService("web"); got.ResourceVersion != ready.ResourceVersion {
		t.Errorf("the Service was written by the backend update: resourceVersion %s, was %s; status %+v",
			got.ResourceVersion, ready.ResourceVersion, got.Status)
	}

	// (b) While no manager runs, one node leaves and another joins; the
	// Service's condition still records its configuration.
	stop()
	if err := h.cs.CoreV1().Nodes().Delete(ctx, h.nodeName(0), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	addNode(4)
	h, _ = startIn(t, ns, nil, clouds, opts)
	h.eventually(30*time.Second, "the targets of the adopted load balancer brought up to date", func() (bool, error) {
		return slices.Equal(targets(uid), want(1, 2, 3, 4)), nil
	})
	if got := h.getService("web"); got.ResourceVersion != ready.ResourceVersion {
		t.Errorf("the adopted Service was written: resourceVersion %s, was %s; status %+v",
			got.ResourceVersion, ready.ResourceVersion, got.Status)
	}
	// The recorder counts repeats of an event in one Event object.
	if ev, ok := h.findEvent("web", "EnsuringLoadBalancer"); !ok || ev.Count != 1 {
		t.Errorf("EnsuringLoadBalancer event %+v (found %v): want it once, the adopted load balancer is not ensured again", ev, ok)
	}
}

// A manager that adopts load balancers at start-up checks their backends
// against one listing (the minicloud provider lists a targets digest per load
// balancer) and updates only the one whose targets changed while no manager
// ran: one update instead of one per load balancer.
func TestMinicloudAdoptedBackendsCheckedByListing(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond})
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	ns := testenv.Get(t).Namespace(t)
	opts := Options{ClusterName: "mc-adopt-list-test", NodeUpdateWindow: 200 * time.Millisecond}
	h, stop := startIn(t, ns, nil, clouds, opts)
	nodes := &mcNodes{t: t, h: h, mc: mc, ids: map[int]string{}}
	addNode, want := nodes.add, nodes.want
	addNode(0)
	addNode(1)
	names := []string{"web-0", "web-1", "web-2"}
	uids := map[string]string{}
	for _, name := range names {
		h.createService(lbService(name, func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }))
	}
	for _, name := range names {
		h.waitCondition(name, ReasonReady, 30*time.Second)
		uids[name] = string(h.getService(name).UID)
	}
	allTargets := func(idx ...int) func() (bool, error) {
		return func() (bool, error) {
			for _, name := range names {
				if !slices.Equal(lbTargets(ctx, mc, uids[name]), want(idx...)) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	h.eventually(30*time.Second, "every load balancer targeting both nodes", allTargets(0, 1))

	// While no manager runs, somebody takes node 1 out of web-1's load
	// balancer.
	stop()
	lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: uids["web-1"]}})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("web-1's load balancer: %v, %v", lbs, err)
	}
	lb := lbs[0]
	spec := api.LoadBalancerSpec{Tags: lb.Tags, Listeners: lb.Listeners, HealthCheck: lb.HealthCheck, SourceRanges: lb.SourceRanges,
		Algorithm: lb.Algorithm, IdleTimeoutSeconds: lb.IdleTimeoutSeconds, ProxyProtocol: lb.ProxyProtocol,
		Targets: []api.Target{{InstanceID: nodes.ids[0]}}}
	if _, err := mc.Client.UpdateLoadBalancer(ctx, lb.ID, spec); err != nil {
		t.Fatal(err)
	}
	if err := mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}

	h, _ = startIn(t, ns, nil, clouds, opts)
	h.eventually(30*time.Second, "web-1's load balancer targeting both nodes again", func() (bool, error) {
		return slices.Equal(lbTargets(ctx, mc, uids["web-1"]), want(0, 1)), nil
	})
	// A node joins: every load balancer gets it. Whichever pass adopted
	// web-0 and web-2 (before this one or in it), each was sent one update
	// in all; checked one by one, they would have had two.
	addNode(2)
	h.eventually(30*time.Second, "every load balancer targeting the joined node", allTargets(0, 1, 2))
	stats, err := mc.Client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := stats.Requests["PUT /v1/load-balancers/{id}"]; n != 4 {
		t.Errorf("%d load balancer updates since the restart, want 4: web-1's repair and one per load balancer for the joined node (stats %v)", n, stats.Requests)
	}
	for _, name := range names {
		if ev, ok := h.findEvent(name, "EnsuringLoadBalancer"); !ok || ev.Count != 1 {
			t.Errorf("%s: EnsuringLoadBalancer event %+v (found %v): want it once, the adopted load balancer is not ensured again", name, ev, ok)
		}
	}
}

// A Service that carries our finalizer but has no load balancer (a leader
// added the finalizer and lost its lease before creating it) is created
// without a lookup when one listing shows its load balancer missing: one
// create each, no lookup by name and no read-back.
func TestMinicloudFinalizedWithoutLoadBalancerCreatedWithoutLookup(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	ns := testenv.Get(t).Namespace(t)
	inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: ns + "-n0", Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"web-0", "web-1", "web-2"}
	// The node and the Services exist, these with the finalizer, before
	// any manager runs.
	cs := testenv.Get(t).Clientset(t)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.Name}, Spec: v1.NodeSpec{ProviderID: mcprovider.ProviderID(inst.ID)}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	for _, name := range names {
		svc := lbService(name, func(s *v1.Service) { s.Finalizers = []string{Finalizer}; s.Spec.Ports[0].NodePort = 0 })
		svc.Namespace = ns
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	h, _ := startIn(t, ns, nil, clouds, Options{ClusterName: "mc-listed-absent-test", NodeUpdateWindow: 200 * time.Millisecond})
	for _, name := range names {
		h.waitCondition(name, ReasonReady, 30*time.Second)
	}
	stats, err := mc.Client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := stats.Requests["POST /v1/load-balancers"]; n != int64(len(names)) {
		t.Errorf("%d creates, want %d (stats %v)", n, len(names), stats.Requests)
	}
	if n := stats.Requests["GET /v1/load-balancers/{id}"]; n != 0 {
		t.Errorf("%d read-backs of a created load balancer, want none: the creates were not marked absent (stats %v)", n, stats.Requests)
	}
	if n := stats.Requests["GET /v1/load-balancers"]; n > 1 {
		t.Errorf("%d lookups or listings of load balancers, want the one listing (stats %v)", n, stats.Requests)
	}
}

// mcNodes makes nodes backed by minicloud instances for a harness's tests:
// add(i) creates node i's instance and Node, want(i...) is the sorted
// instance IDs of nodes i.
type mcNodes struct {
	t   *testing.T
	h   *harness
	mc  *minicloudtest.Cloud
	ids map[int]string
}

func (m *mcNodes) add(i int) {
	m.t.Helper()
	inst, err := m.mc.Client.CreateInstance(context.Background(), api.InstanceCreate{Name: m.h.nodeName(i), Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		m.t.Fatal(err)
	}
	m.ids[i] = inst.ID
	m.h.createNodes(i, i+1, func(n *v1.Node) { n.Spec.ProviderID = mcprovider.ProviderID(inst.ID) })
}

func (m *mcNodes) want(idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, m.ids[i])
	}
	slices.Sort(out)
	return out
}

// lbTargets are the sorted instance IDs of the targets of the one minicloud
// load balancer of the Service with uid, or nil when there is not exactly one.
func lbTargets(ctx context.Context, mc *minicloudtest.Cloud, uid string) []string {
	lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: uid}})
	if err != nil || len(lbs) != 1 {
		return nil
	}
	var out []string
	for _, tg := range lbs[0].Targets {
		out = append(out, tg.InstanceID)
	}
	slices.Sort(out)
	return out
}

// A cleanup needs no lookup to know that a load balancer exists when a
// listing of the last absentListingAge has it; no listing, an older one, or
// one without it says nothing (the cleanup looks it up), and asking never
// lists.
func TestListingTellsCleanupLoadBalancerExists(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	p := cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client))
	const clusterName = "mc-listed-test"
	uid := types.UID("5e0c7d2a-8f4b-4c1e-9a6d-3b2f1e0d9c8b")
	spec := api.LoadBalancerSpec{
		Name:      "listed-test",
		Tags:      map[string]string{mcprovider.TagCluster: clusterName, mcprovider.TagServiceNamespace: "default", mcprovider.TagServiceName: "web", mcprovider.TagServiceUID: string(uid)},
		Listeners: []api.Listener{{Protocol: api.ProtocolTCP, Port: 80, TargetPort: 30080}},
	}
	if _, err := mc.Client.CreateLoadBalancer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	fc := clocktesting.NewFakeClock(time.Now())
	l := newProvisioningListings(provisioningFreshness, fc)
	if l.listed(p, uid, absentListingAge) {
		t.Error("listed before any listing, want false")
	}
	if st, err := mc.Client.Stats(ctx); err != nil || st.Total != 0 {
		t.Errorf("requests %v (%v), want none: listed never lists", st.Requests, err)
	}
	if l.absent(ctx, p, clusterName, uid, absentListingAge) {
		t.Error("absent after a listing that has the load balancer, want false")
	}
	if !l.listed(p, uid, absentListingAge) {
		t.Error("not listed after a listing that has the load balancer, want true")
	}
	if l.listed(p, "another-uid", absentListingAge) {
		t.Error("another Service's load balancer listed, want false")
	}
	fc.Step(absentListingAge + time.Second)
	if l.listed(p, uid, absentListingAge) {
		t.Errorf("listed from a listing %v old, want false", absentListingAge+time.Second)
	}
}
