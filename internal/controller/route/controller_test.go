package route

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	testCluster = "test-cluster"
	testLabel   = "stratus.test/route"
)

var errInjected = errors.New("injected cloud failure")

// testCloud is fake.Cloud with its routes guarded for concurrent use, call
// counting, failure injection and, optionally, node-address tracking.
type testCloud struct {
	*fake.Cloud

	mu             sync.Mutex
	lists          int
	creates        map[string]int  // create attempts per destination CIDR
	failCreate     map[string]bool // destination CIDRs whose creation fails
	failList       bool            // ListRoutes fails with a transient error (an outage)
	trackAddresses bool            // listed routes have EnableNodeAddresses
	wrongPriority  []string        // calls whose context had another priority
}

func newTestCloud() *testCloud {
	return &testCloud{
		Cloud:      &fake.Cloud{RouteMap: map[string]*fake.Route{}},
		creates:    map[string]int{},
		failCreate: map[string]bool{},
	}
}

func (c *testCloud) Routes() (cloudprovider.Routes, bool) { return c, true }

func (c *testCloud) checkPriority(ctx context.Context, call string) {
	if p := cloud.PriorityFrom(ctx); p != cloud.PriorityRoutes {
		c.wrongPriority = append(c.wrongPriority, fmt.Sprintf("%s at %s", call, p))
	}
}

func (c *testCloud) ListRoutes(ctx context.Context, cluster string) ([]*cloudprovider.Route, error) {
	c.mu.Lock()
	c.lists++
	c.checkPriority(ctx, "ListRoutes")
	track, fail := c.trackAddresses, c.failList
	c.mu.Unlock()
	if fail {
		return nil, stratus.Transient(errInjected)
	}
	routes, err := c.Cloud.ListRoutes(ctx, cluster)
	for _, r := range routes {
		r.EnableNodeAddresses = track
	}
	return routes, err
}

func (c *testCloud) CreateRoute(ctx context.Context, cluster, nameHint string, r *cloudprovider.Route) error {
	c.mu.Lock()
	c.creates[r.DestinationCIDR]++
	c.checkPriority(ctx, "CreateRoute")
	fail := c.failCreate[r.DestinationCIDR]
	c.mu.Unlock()
	if fail {
		return errInjected
	}
	return c.Cloud.CreateRoute(ctx, cluster, nameHint, r)
}

func (c *testCloud) DeleteRoute(ctx context.Context, cluster string, r *cloudprovider.Route) error {
	c.mu.Lock()
	c.checkPriority(ctx, "DeleteRoute")
	c.mu.Unlock()
	return c.Cloud.DeleteRoute(ctx, cluster, r)
}

// seed puts routes into the cloud under their Name.
func (c *testCloud) seed(routes ...*cloudprovider.Route) {
	c.Cloud.Lock.Lock()
	defer c.Cloud.Lock.Unlock()
	for _, r := range routes {
		c.Cloud.RouteMap[r.Name] = &fake.Route{ClusterName: testCluster, Route: *r}
	}
}

// snapshot returns the cloud's routes of the test cluster as routeString values
// prefixed with their name, sorted.
func (c *testCloud) snapshot() []string {
	c.Cloud.Lock.Lock()
	defer c.Cloud.Lock.Unlock()
	var out []string
	for name, r := range c.Cloud.RouteMap {
		if r.ClusterName == testCluster {
			out = append(out, name+": "+routeString(&r.Route))
		}
	}
	slices.Sort(out)
	return out
}

func (c *testCloud) listCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists
}

func (c *testCloud) createCount(cidr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creates[cidr]
}

func (c *testCloud) setFailList(fail bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failList = fail
}

func (c *testCloud) setFailCreate(cidr string, fail bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failCreate[cidr] = fail
}

// harness runs the route controller in a manager against the test control plane.
type harness struct {
	t     *testing.T
	cs    kubernetes.Interface
	cloud *testCloud
}

func defaultTestOptions() Options {
	return Options{
		ClusterName:          testCluster,
		ClusterCIDRs:         mustCIDRs("10.120.0.0/16"),
		ReconciliationPeriod: 200 * time.Millisecond,
		MaxRetryBackoff:      time.Second,
	}
}

func mustCIDRs(s string) []netip.Prefix {
	cidrs, err := ParseClusterCIDRs(s)
	if err != nil {
		panic(err)
	}
	return cidrs
}

func newManager(t *testing.T) manager.Manager {
	t.Helper()
	env := testenv.Get(t)
	mgr, err := manager.New(env.Config, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// Every test registers a controller named "route" in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// start starts a manager with the route controller on tc, after removing nodes
// earlier tests left behind. Cleanup stops the manager and deletes the nodes.
func start(t *testing.T, tc *testCloud, opts Options) *harness {
	t.Helper()
	return startWith(t, tc, cloud.NewProvider("fake", tc), opts)
}

// startWith is start with p, a provider of tc built with options of the test's.
func startWith(t *testing.T, tc *testCloud, p *cloud.Provider, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, cs: testenv.Get(t).Clientset(t), cloud: tc}
	h.deleteNodes()
	mgr := newManager(t)
	started, err := Add(mgr, cloud.Single(p), opts)
	if err != nil || !started {
		t.Fatalf("Add = %v, %v; want started", started, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		h.deleteNodes()
		tc.mu.Lock()
		defer tc.mu.Unlock()
		if len(tc.wrongPriority) > 0 {
			t.Errorf("cloud calls without the routes priority: %v", tc.wrongPriority)
		}
	})
	return h
}

func (h *harness) deleteNodes() {
	err := h.cs.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: testLabel})
	if err != nil {
		h.t.Fatalf("delete test nodes: %v", err)
	}
}

// createNode creates a node with the given internal IP and pod CIDRs, and
// optionally extra status conditions.
func (h *harness) createNode(name, ip string, cidrs []string, conds ...v1.NodeCondition) *v1.Node {
	h.t.Helper()
	return h.create(newNode(name, ip, cidrs, conds...))
}

func newNode(name, ip string, cidrs []string, conds ...v1.NodeCondition) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{testLabel: "true"}},
		Spec:       v1.NodeSpec{PodCIDRs: cidrs},
		Status:     v1.NodeStatus{Addresses: addrs(ip), Conditions: conds},
	}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	return n
}

// create creates n, with its status.
func (h *harness) create(n *v1.Node) *v1.Node {
	h.t.Helper()
	created, err := h.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create node %s: %v", n.Name, err)
	}
	if len(n.Status.Conditions) > 0 && len(created.Status.Conditions) == 0 {
		created.Status.Conditions = n.Status.Conditions
		if created, err = h.cs.CoreV1().Nodes().UpdateStatus(context.Background(), created, metav1.UpdateOptions{}); err != nil {
			h.t.Fatalf("set conditions of node %s: %v", n.Name, err)
		}
	}
	return created
}

func (h *harness) node(name string) *v1.Node {
	h.t.Helper()
	n, err := h.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func networkCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeNetworkUnavailable {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// eventually polls cond until it holds, failing the test with describe() after
// the deadline.
func (h *harness) eventually(what string, cond func() bool, describe func() string) {
	h.t.Helper()
	testsupport.EventuallyState(h.t, 30*time.Second, what, func(context.Context) (bool, string) { return cond(), describe() })
}

// waitRoutes waits until the cloud holds exactly want (snapshot format).
func (h *harness) waitRoutes(want ...string) {
	h.t.Helper()
	slices.Sort(want)
	h.eventually("routes", func() bool { return cmp.Equal(want, h.cloud.snapshot()) },
		func() string { return cmp.Diff(want, h.cloud.snapshot()) })
}

// waitCondition waits until node's NetworkUnavailable has status and reason.
func (h *harness) waitCondition(node string, status v1.ConditionStatus, reason string) *v1.NodeCondition {
	h.t.Helper()
	var c *v1.NodeCondition
	h.eventually("NetworkUnavailable of "+node, func() bool {
		c = networkCondition(h.node(node))
		return c != nil && c.Status == status && c.Reason == reason
	}, func() string { return fmt.Sprintf("condition is %+v, want %s/%s", c, status, reason) })
	return c
}

func created(node, cidr, ip string) string {
	return testCluster + "-" + node + "-" + cidr + ": " + node + " " + cidr + " " + ip
}

func TestRoutesAndConditions(t *testing.T) {
	tc := newTestCloud()
	tc.seed(
		// Kept: the right route for node a (a recreated one would be renamed).
		&cloudprovider.Route{Name: "keep-me", TargetNode: "a", DestinationCIDR: "10.120.0.0/24"},
		// Deleted: a node that does not exist, and a blackhole route in range.
		&cloudprovider.Route{Name: "stale", TargetNode: "gone", DestinationCIDR: "10.120.9.0/24"},
		&cloudprovider.Route{Name: "blackhole-in", DestinationCIDR: "10.120.8.0/24", Blackhole: true},
		// Untouched: out of the cluster CIDR.
		&cloudprovider.Route{Name: "blackhole-out", DestinationCIDR: "10.1.2.0/24", Blackhole: true},
		&cloudprovider.Route{Name: "outsider", TargetNode: "gone", DestinationCIDR: "192.168.5.0/24"},
		&cloudprovider.Route{Name: "adjacent", TargetNode: "b", DestinationCIDR: "10.121.0.0/24"},
	)
	h := start(t, tc, defaultTestOptions())
	h.createNode("a", "10.0.0.1", []string{"10.120.0.0/24"})
	h.createNode("b", "10.0.0.2", []string{"10.120.1.0/24"})
	h.createNode("c", "10.0.0.3", nil)
	calico := v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: "CalicoIsUp",
		Message: "Calico is running", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))}
	h.createNode("d", "10.0.0.4", []string{"10.120.3.0/24"}, calico)

	h.waitRoutes(
		"keep-me: a 10.120.0.0/24 ",
		created("b", "10.120.1.0/24", "10.0.0.2"),
		created("d", "10.120.3.0/24", "10.0.0.4"),
		"blackhole-out:  10.1.2.0/24  blackhole",
		"outsider: gone 192.168.5.0/24 ",
		"adjacent: b 10.121.0.0/24 ",
	)
	for _, n := range []string{"a", "b"} {
		h.waitCondition(n, v1.ConditionFalse, ReasonRouteCreated)
	}
	// A condition a CNI wrote with the same status is taken over; its status did
	// not change, so neither does its transition time.
	d := h.waitCondition("d", v1.ConditionFalse, ReasonRouteCreated)
	if !d.LastTransitionTime.Equal(&calico.LastTransitionTime) {
		t.Errorf("lastTransitionTime of d = %v, want the CNI's %v", d.LastTransitionTime, calico.LastTransitionTime)
	}
	if c := networkCondition(h.node("c")); c != nil {
		t.Errorf("node c without pod CIDR or route got %+v", c)
	}

	// Deleting node b deletes its route; the reconcile that does it leaves the
	// conditions that are already right alone.
	rvA := h.node("a").ResourceVersion
	if err := h.cs.CoreV1().Nodes().Delete(context.Background(), "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitRoutes(
		"keep-me: a 10.120.0.0/24 ",
		created("d", "10.120.3.0/24", "10.0.0.4"),
		"blackhole-out:  10.1.2.0/24  blackhole",
		"outsider: gone 192.168.5.0/24 ",
		"adjacent: b 10.121.0.0/24 ",
	)
	if rv := h.node("a").ResourceVersion; rv != rvA {
		t.Errorf("node a was written (resourceVersion %s -> %s) although its condition was already right", rvA, rv)
	}
}

func TestStaleRouteOfNodeWithoutCIDR(t *testing.T) {
	tc := newTestCloud()
	tc.seed(&cloudprovider.Route{Name: "old", TargetNode: "e", DestinationCIDR: "10.120.4.0/24"})
	h := start(t, tc, defaultTestOptions())
	h.createNode("e", "10.0.0.5", nil)
	h.waitRoutes()
	h.waitCondition("e", v1.ConditionTrue, ReasonNoRouteCreated)
}

func TestDualStack(t *testing.T) {
	opts := defaultTestOptions()
	opts.ClusterCIDRs = mustCIDRs("10.120.0.0/16,fd00:10::/48")
	tc := newTestCloud()
	tc.seed(&cloudprovider.Route{Name: "stale6", TargetNode: "gone", DestinationCIDR: "fd00:10:0:9::/64"},
		&cloudprovider.Route{Name: "out6", TargetNode: "gone", DestinationCIDR: "fd00:11::/64"})
	h := start(t, tc, opts)
	h.createNode("ds", "10.0.0.6", []string{"10.120.6.0/24", "fd00:10:0:6::/64"})
	h.waitRoutes(
		created("ds", "10.120.6.0/24", "10.0.0.6"),
		created("ds", "fd00:10:0:6::/64", "10.0.0.6"),
		"out6: gone fd00:11::/64 ",
	)
	h.waitCondition("ds", v1.ConditionFalse, ReasonRouteCreated)
}

func TestFailingCreateIsRetried(t *testing.T) {
	tc := newTestCloud()
	tc.setFailCreate("10.120.7.0/24", true)
	errorsBefore := failedSyncs(t)
	h := start(t, tc, defaultTestOptions())
	h.createNode("f", "10.0.0.7", []string{"10.120.7.0/24"})
	h.createNode("g", "10.0.0.8", []string{"10.120.8.0/24"})

	h.waitCondition("f", v1.ConditionTrue, ReasonNoRouteCreated)
	h.waitCondition("g", v1.ConditionFalse, ReasonRouteCreated)
	var ev v1.Event
	h.eventually("FailedToCreateRoute event", func() bool {
		list, err := h.cs.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(),
			metav1.ListOptions{FieldSelector: "involvedObject.name=f,reason=" + ReasonFailedToCreateRoute})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		ev = list.Items[0]
		return true
	}, func() string { return "no event" })
	if ev.Type != v1.EventTypeWarning || ev.Source.Component != Component || ev.InvolvedObject.Kind != "Node" ||
		!strings.Contains(ev.Message, "10.120.7.0/24") || !strings.Contains(ev.Message, errInjected.Error()) {
		t.Errorf("event = %s %s from %q on %s: %q", ev.Type, ev.Reason, ev.Source.Component, ev.InvolvedObject.Kind, ev.Message)
	}
	// Retried with backoff although nothing about the node changed.
	h.eventually("a retried create", func() bool { return tc.createCount("10.120.7.0/24") >= 2 },
		func() string { return fmt.Sprintf("%d attempts", tc.createCount("10.120.7.0/24")) })
	errorsAfter := failedSyncs(t)
	if errorsAfter <= errorsBefore {
		t.Errorf("route_controller_route_sync_total{outcome=error} did not grow (%v -> %v)", errorsBefore, errorsAfter)
	}

	// The cloud recovers: the next retry creates the route.
	tc.setFailCreate("10.120.7.0/24", false)
	h.waitRoutes(created("f", "10.120.7.0/24", "10.0.0.7"), created("g", "10.120.8.0/24", "10.0.0.8"))
	h.waitCondition("f", v1.ConditionFalse, ReasonRouteCreated)
}

// A reconcile that failed during an outage of the routes provider runs again
// as soon as the provider answers, not when its backoff ends: after six failed
// reconciles the next retry waits at least five periods more, and the route is
// created by the reconcile the recovery triggered.
func TestRecoveryEndsBackoff(t *testing.T) {
	tc := newTestCloud()
	tc.setFailList(true)
	// No retries in the cloud layer: each failed reconcile is one failed call,
	// and three in a row are an outage.
	p := cloud.NewProvider("fake", tc, cloud.WithBudget(cloud.BudgetConfig{MaxRetries: -1}))
	opts := defaultTestOptions()
	opts.ReconciliationPeriod, opts.MaxRetryBackoff = time.Second, time.Hour
	failedBefore := failedSyncs(t)
	recoveredBefore := syncCount(t, outcomeChanged, triggerRecovered)
	h := startWith(t, tc, p, opts)
	h.createNode("r", "10.0.0.9", []string{"10.120.9.0/24"})
	h.eventually("six failed reconciles", func() bool { return failedSyncs(t)-failedBefore >= 6 },
		func() string { return fmt.Sprintf("%v failed", failedSyncs(t)-failedBefore) })
	if got := tc.snapshot(); len(got) != 0 {
		t.Fatalf("routes while listing failed: %v", got)
	}

	// The provider answers again: another controller's call (here the
	// test's) ends the outage.
	tc.setFailList(false)
	routes, _ := p.Routes()
	if _, err := routes.ListRoutes(cloud.WithPriority(context.Background(), cloud.PriorityRoutes), testCluster); err != nil {
		t.Fatalf("list routes after the outage: %v", err)
	}
	h.waitRoutes(created("r", "10.120.9.0/24", "10.0.0.9"))
	h.waitCondition("r", v1.ConditionFalse, ReasonRouteCreated)
	if got := syncCount(t, outcomeChanged, triggerRecovered) - recoveredBefore; got != 1 {
		t.Errorf("reconciles triggered by the recovery that created routes: %v, want 1", got)
	}
	// Nothing failed since: a later recovery of the provider runs nothing.
	listsBefore := tc.listCount()
	for range 3 {
		tc.setFailList(true)
		_, _ = routes.ListRoutes(cloud.WithPriority(context.Background(), cloud.PriorityRoutes), testCluster)
	}
	tc.setFailList(false)
	if _, err := routes.ListRoutes(cloud.WithPriority(context.Background(), cloud.PriorityRoutes), testCluster); err != nil {
		t.Fatalf("list routes after the second outage: %v", err)
	}
	testsupport.Consistently(t, 3*time.Second, "no reconcile after a recovery with nothing failed", func(context.Context) (bool, string) {
		n := tc.listCount()
		return n == listsBefore+4, fmt.Sprintf("%d listings, want %d (the test's)", n, listsBefore+4)
	})
}

// syncCount reads route_controller_route_sync_total{outcome, trigger}.
func syncCount(t *testing.T, outcome, trigger string) float64 {
	t.Helper()
	var m dto.Metric
	if err := syncTotal.WithLabelValues(outcome, trigger).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// failedSyncs reads route_controller_route_sync_total{outcome="error"}.
func failedSyncs(t *testing.T) float64 {
	t.Helper()
	total := 0.0
	for _, trigger := range []string{triggerNodeChange, triggerPeriodic, triggerRecovered} {
		total += syncCount(t, outcomeError, trigger)
	}
	return total
}

func TestRouteReplacedWhenTrackedAddressesChange(t *testing.T) {
	tc := newTestCloud()
	tc.trackAddresses = true
	h := start(t, tc, defaultTestOptions())
	h.createNode("h", "10.0.0.9", []string{"10.120.10.0/24"})
	h.waitRoutes(created("h", "10.120.10.0/24", "10.0.0.9"))

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := h.node("h")
		n.Status.Addresses = addrs("10.0.0.99")
		_, err := h.cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	h.waitRoutes(created("h", "10.120.10.0/24", "10.0.0.99"))
	h.waitCondition("h", v1.ConditionFalse, ReasonRouteCreated)
}

func TestNodeChurnIsRateLimited(t *testing.T) {
	opts := defaultTestOptions()
	opts.ReconciliationPeriod = 250 * time.Millisecond
	tc := newTestCloud()
	h := start(t, tc, opts)
	// The initial (periodic) reconcile of the empty cluster.
	h.eventually("the initial reconcile", func() bool { return tc.listCount() >= 1 }, func() string { return "no ListRoutes" })

	const nodes = 100
	begin, listsBefore := time.Now(), tc.listCount()
	var want []string
	for i := range nodes {
		name := fmt.Sprintf("churn-%03d", i)
		cidr := fmt.Sprintf("10.120.%d.0/24", 100+i)
		ip := fmt.Sprintf("10.0.1.%d", i)
		h.createNode(name, ip, []string{cidr})
		want = append(want, created(name, cidr, ip))
	}
	h.waitRoutes(want...)
	elapsed, lists := time.Since(begin), tc.listCount()-listsBefore
	// At most one reconcile starts per period; one more may be running at the end.
	if limit := int(elapsed/opts.ReconciliationPeriod) + 2; lists > limit {
		t.Errorf("%d nodes joining over %v caused %d reconciles, want at most %d (one per %v)",
			nodes, elapsed.Round(time.Millisecond), lists, limit, opts.ReconciliationPeriod)
	}
	t.Logf("%d nodes over %v: %d reconciles", nodes, elapsed.Round(time.Millisecond), lists)
	h.eventually("all nodes available", func() bool {
		list, err := h.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: testLabel})
		if err != nil {
			return false
		}
		for i := range list.Items {
			if c := networkCondition(&list.Items[i]); c == nil || c.Reason != ReasonRouteCreated {
				return false
			}
		}
		return len(list.Items) == nodes
	}, func() string { return "some node lacks RouteCreated" })
}

func TestAdd(t *testing.T) {
	withRoutes := cloud.Single(cloud.NewProvider("fake", newTestCloud()))
	noRoutes := cloud.Single(cloud.NewProvider("fake", &fake.Cloud{DisableRoutes: true}))
	tests := []struct {
		name    string
		clouds  *cloud.Set
		opts    Options
		started bool
		wantErr string
	}{
		{name: "routes supported", clouds: withRoutes, opts: defaultTestOptions(), started: true},
		{name: "routes not supported", clouds: noRoutes, opts: Options{}},
		{name: "no routes provider", clouds: &cloud.Set{}, opts: Options{}},
		{name: "no cluster CIDR", clouds: withRoutes, opts: Options{}, wantErr: "--cluster-cidr"},
		{name: "negative period", clouds: withRoutes, opts: Options{ReconciliationPeriod: -1}, wantErr: "--route-reconciliation-period"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started, err := Add(newManager(t), tt.clouds, tt.opts)
			if started != tt.started {
				t.Errorf("started = %v, want %v", started, tt.started)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Add: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Add error = %v, want one naming %s", err, tt.wantErr)
			}
			if tt.name == "no cluster CIDR" && !errors.Is(err, ErrNoClusterCIDR) {
				t.Errorf("Add error %v is not ErrNoClusterCIDR", err)
			}
		})
	}
}

func TestForeignNodeLeftAlone(t *testing.T) {
	tc := newTestCloud()
	// Another cloud's node with a route in the cluster CIDR (programmed by
	// somebody else): not ours to delete or to report on.
	tc.seed(&cloudprovider.Route{Name: "theirs", TargetNode: "foreign", DestinationCIDR: "10.120.20.0/24"})
	h := start(t, tc, defaultTestOptions())
	foreign := newNode("foreign", "10.0.0.20", []string{"10.120.21.0/24"})
	foreign.Spec.ProviderID = "othercloud://machine-1"
	h.create(foreign)
	// A node of ours joining afterwards proves a reconcile ran after both.
	h.createNode("ours", "10.0.0.21", []string{"10.120.22.0/24"})
	h.waitCondition("ours", v1.ConditionFalse, ReasonRouteCreated)
	h.waitRoutes("theirs: foreign 10.120.20.0/24 ", created("ours", "10.120.22.0/24", "10.0.0.21"))
	if c := networkCondition(h.node("foreign")); c != nil {
		t.Errorf("foreign node got %+v", c)
	}
}
