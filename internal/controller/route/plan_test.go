package route

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	cloudprovider "k8s.io/cloud-provider"
)

func TestResponsible(t *testing.T) {
	// Upstream's TestIsResponsibleForRoute cases, plus dual-stack and edge cases.
	tests := []struct {
		cluster string
		route   string
		want    bool
	}{
		{"10.244.0.0/16", "10.244.0.0/24", true},
		{"10.244.0.0/16", "10.244.10.0/24", true},
		{"10.244.0.0/16", "10.244.255.0/24", true},
		{"10.244.0.0/14", "10.244.0.0/24", true},
		{"10.244.0.0/14", "10.247.255.0/24", true},
		{"a00:100::/10", "a00:100::/24", true},
		{"10.244.0.0/16", "10.224.0.0/24", false},
		{"10.244.0.0/16", "10.0.10.0/24", false},
		{"10.244.0.0/16", "10.255.255.0/24", false},
		{"10.244.0.0/14", "10.248.0.0/24", false},
		{"10.244.0.0/14", "10.243.255.0/24", false},
		{"a00:100::/10", "b00:100::/24", false},
		// A route larger than the cluster CIDR whose last address falls inside.
		{"10.244.255.0/24", "10.244.0.0/16", true},
		// A route covering the cluster CIDR from outside on both ends.
		{"10.244.0.0/16", "10.0.0.0/8", false},
		// Host bits in the route destination are ignored.
		{"10.244.0.0/16", "10.244.3.7/24", true},
		{"10.244.0.0/16", "10.244.3.7/32", true},
		// Families never match each other.
		{"10.244.0.0/16", "::ffff:10.244.0.0/120", false},
		{"10.244.0.0/16,fd00::/48", "fd00::/64", true},
		{"10.244.0.0/16,fd00::/48", "fd00:0:1::/64", false},
		{"10.244.0.0/16,fd00::/48", "10.244.7.0/24", true},
	}
	for _, tt := range tests {
		t.Run(tt.cluster+"/"+tt.route, func(t *testing.T) {
			cidrs, err := ParseClusterCIDRs(tt.cluster)
			if err != nil {
				t.Fatal(err)
			}
			got, err := responsible(cidrs, tt.route)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("responsible(%s, %s) = %v, want %v", tt.cluster, tt.route, got, tt.want)
			}
		})
	}
	if _, err := responsible(nil, "not-a-cidr"); err == nil {
		t.Error("responsible of an unparsable destination: no error")
	}
}

func TestLastAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.244.0.0/16":    "10.244.255.255",
		"10.244.0.0/14":    "10.247.255.255",
		"10.244.1.0/24":    "10.244.1.255",
		"10.244.1.7/32":    "10.244.1.7",
		"0.0.0.0/0":        "255.255.255.255",
		"fd00::/64":        "fd00::ffff:ffff:ffff:ffff",
		"fd00:0:0:1::/127": "fd00:0:0:1::1",
	} {
		if got := lastAddr(netip.MustParsePrefix(in)).String(); got != want {
			t.Errorf("lastAddr(%s) = %s, want %s", in, got, want)
		}
	}
}

func addrs(ip string) []v1.NodeAddress {
	return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}
}

func testNode(name, ip string, cidrs ...string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.NodeSpec{PodCIDRs: cidrs},
		Status:     v1.NodeStatus{Addresses: addrs(ip)},
	}
}

// route is a compact route literal: node may be empty; ip "" means no addresses.
func route(node, cidr, ip string) *cloudprovider.Route {
	r := &cloudprovider.Route{Name: node + "/" + cidr, TargetNode: types.NodeName(node), DestinationCIDR: cidr}
	if ip != "" {
		r.TargetNodeAddresses = addrs(ip)
	}
	return r
}

func tracked(r *cloudprovider.Route) *cloudprovider.Route {
	r.EnableNodeAddresses = true
	return r
}

func blackhole(r *cloudprovider.Route) *cloudprovider.Route {
	r.Blackhole = true
	return r
}

// applyPlan plays the plan against a route list, as a cloud would with every
// operation succeeding, and returns the resulting routes as "node cidr ip"
// strings, sorted.
func applyPlan(routes []*cloudprovider.Route, p plan) []string {
	var out []string
	for _, r := range routes {
		if !slices.Contains(p.deletes, r) {
			out = append(out, routeString(r))
		}
	}
	for _, c := range p.creates {
		out = append(out, routeString(c.route))
	}
	slices.Sort(out)
	return out
}

func routeString(r *cloudprovider.Route) string {
	var ips []string
	for _, a := range r.TargetNodeAddresses {
		ips = append(ips, a.Address)
	}
	s := string(r.TargetNode) + " " + r.DestinationCIDR + " " + strings.Join(ips, ",")
	if r.Blackhole {
		s += " blackhole"
	}
	return s
}

func TestComputePlan(t *testing.T) {
	// The cases of upstream's TestReconcile, plus ownership.
	node1 := testNode("node-1", "10.0.1.1", "10.120.0.0/24")
	node2 := testNode("node-2", "10.0.2.1", "10.120.1.0/24")
	nodeNoCIDR := testNode("node-2", "10.0.5.1")
	node3 := testNode("node-3", "10.0.3.1", "10.120.0.0/24", "a00:100::/24")
	node4 := testNode("node-4", "10.0.4.1", "10.120.1.0/24", "a00:200::/24")
	nodeDup := testNode("node-4", "10.0.4.1", "10.120.1.0/24", "10.120.1.0/24")
	single := []netip.Prefix{netip.MustParsePrefix("10.120.0.0/16")}
	dual := append(slices.Clone(single), netip.MustParsePrefix("a00::/8"))
	dualExpected := []string{
		"node-3 10.120.0.0/24 10.0.3.1", "node-3 a00:100::/24 10.0.3.1",
		"node-4 10.120.1.0/24 10.0.4.1", "node-4 a00:200::/24 10.0.4.1",
	}
	singleExpected := []string{"node-1 10.120.0.0/24 10.0.1.1", "node-2 10.120.1.0/24 10.0.2.1"}

	tests := []struct {
		name    string
		cidrs   []netip.Prefix
		nodes   []*v1.Node
		foreign []string
		routes  []*cloudprovider.Route
		want    []string
		// unavailable is the NetworkUnavailable status per node after the plan
		// succeeded; nodes missing here get no condition.
		unavailable map[string]bool
		creates     int
		deletes     int
	}{
		{
			name: "tracked routes without addresses yet are replaced", cidrs: dual, nodes: []*v1.Node{node3, node4},
			routes: []*cloudprovider.Route{
				tracked(route("node-3", "10.120.0.0/24", "")), tracked(route("node-4", "10.120.1.0/24", "")),
				tracked(route("node-3", "a00:100::/24", "")), tracked(route("node-4", "a00:200::/24", "")),
			},
			want: dualExpected, unavailable: map[string]bool{"node-3": false, "node-4": false}, creates: 4, deletes: 4,
		},
		{
			name: "untracked routes without addresses are kept", cidrs: dual, nodes: []*v1.Node{node3, node4},
			routes: []*cloudprovider.Route{
				route("node-3", "10.120.0.0/24", ""), route("node-4", "10.120.1.0/24", ""),
				route("node-3", "a00:100::/24", ""), route("node-4", "a00:200::/24", ""),
			},
			want: []string{
				"node-3 10.120.0.0/24 ", "node-3 a00:100::/24 ",
				"node-4 10.120.1.0/24 ", "node-4 a00:200::/24 ",
			},
			unavailable: map[string]bool{"node-3": false, "node-4": false},
		},
		{
			name: "tracked addresses changed", cidrs: dual, nodes: []*v1.Node{node3, node4},
			routes: []*cloudprovider.Route{
				tracked(route("node-3", "10.120.0.0/24", "10.0.13.1")), tracked(route("node-4", "10.120.1.0/24", "10.0.14.1")),
				tracked(route("node-3", "a00:100::/24", "10.0.13.1")), tracked(route("node-4", "a00:200::/24", "10.0.4.1")),
			},
			want: dualExpected, unavailable: map[string]bool{"node-3": false, "node-4": false}, creates: 3, deletes: 3,
		},
		{
			name: "dual-stack, no routes", cidrs: dual, nodes: []*v1.Node{node3, node4},
			want: dualExpected, unavailable: map[string]bool{"node-3": false, "node-4": false}, creates: 4,
		},
		{
			name: "dual-stack, all routes", cidrs: dual, nodes: []*v1.Node{node3, node4},
			routes: []*cloudprovider.Route{
				route("node-3", "10.120.0.0/24", "10.0.3.1"), route("node-4", "10.120.1.0/24", "10.0.4.1"),
				route("node-3", "a00:100::/24", "10.0.3.1"), route("node-4", "a00:200::/24", "10.0.4.1"),
			},
			want: dualExpected, unavailable: map[string]bool{"node-3": false, "node-4": false},
		},
		{
			name: "dual-stack, routes on the wrong nodes", cidrs: dual, nodes: []*v1.Node{node3, node4},
			routes: []*cloudprovider.Route{
				route("node-3", "10.120.1.0/24", "10.0.3.1"), route("node-4", "10.120.0.0/24", "10.0.4.1"),
				route("node-3", "a00:200::/24", "10.0.3.1"), route("node-4", "a00:100::/24", "10.0.4.1"),
			},
			want: dualExpected, unavailable: map[string]bool{"node-3": false, "node-4": false}, creates: 4, deletes: 4,
		},
		{
			name: "dual-stack, some routes", cidrs: dual, nodes: []*v1.Node{node3, node4},
			routes: []*cloudprovider.Route{
				route("node-3", "10.120.0.0/24", "10.0.3.1"), route("node-4", "a00:200::/24", "10.0.4.1"),
			},
			want: dualExpected, unavailable: map[string]bool{"node-3": false, "node-4": false}, creates: 2,
		},
		{
			name: "dual-stack, routes of unknown nodes", cidrs: dual, nodes: []*v1.Node{node3, node4},
			routes: []*cloudprovider.Route{
				route("node-3", "10.120.0.0/24", "10.0.3.1"), route("node-4", "10.120.1.0/24", "10.0.4.1"),
				route("node-x", "10.120.2.0/24", "10.0.5.1"),
				route("node-3", "a00:100::/24", "10.0.3.1"), route("node-4", "a00:200::/24", "10.0.4.1"),
				route("node-y", "a00:300::/24", "10.0.6.1"),
			},
			want: dualExpected, unavailable: map[string]bool{"node-3": false, "node-4": false}, deletes: 2,
		},
		{
			name: "single, all routes", cidrs: single, nodes: []*v1.Node{node1, node2},
			routes: []*cloudprovider.Route{route("node-1", "10.120.0.0/24", "10.0.1.1"), route("node-2", "10.120.1.0/24", "10.0.2.1")},
			want:   singleExpected, unavailable: map[string]bool{"node-1": false, "node-2": false},
		},
		{
			name: "single, node addresses changed", cidrs: single, nodes: []*v1.Node{node1, node2},
			routes: []*cloudprovider.Route{
				tracked(route("node-1", "10.120.0.0/24", "10.0.1.2")), tracked(route("node-2", "10.120.1.0/24", "10.0.2.2")),
			},
			want: singleExpected, unavailable: map[string]bool{"node-1": false, "node-2": false}, creates: 2, deletes: 2,
		},
		{
			name: "single, untracked addresses changed", cidrs: single, nodes: []*v1.Node{node1, node2},
			routes:      []*cloudprovider.Route{route("node-1", "10.120.0.0/24", "10.0.1.2"), route("node-2", "10.120.1.0/24", "10.0.2.1")},
			want:        []string{"node-1 10.120.0.0/24 10.0.1.2", "node-2 10.120.1.0/24 10.0.2.1"},
			unavailable: map[string]bool{"node-1": false, "node-2": false},
		},
		{
			name: "single, one route missing", cidrs: single, nodes: []*v1.Node{node1, node2},
			routes: []*cloudprovider.Route{route("node-1", "10.120.0.0/24", "10.0.1.1")},
			want:   singleExpected, unavailable: map[string]bool{"node-1": false, "node-2": false}, creates: 1,
		},
		{
			name: "single, no routes", cidrs: single, nodes: []*v1.Node{node1, node2},
			want: singleExpected, unavailable: map[string]bool{"node-1": false, "node-2": false}, creates: 2,
		},
		{
			name: "single, too many routes", cidrs: single, nodes: []*v1.Node{node1, node2},
			routes: []*cloudprovider.Route{
				route("node-1", "10.120.0.0/24", "10.0.1.1"), route("node-2", "10.120.1.0/24", "10.0.2.1"),
				route("node-3", "10.120.2.0/24", "10.0.3.1"), route("node-4", "10.120.3.0/24", "10.0.4.1"),
			},
			want: singleExpected, unavailable: map[string]bool{"node-1": false, "node-2": false}, deletes: 2,
		},
		{
			name: "single, one route incorrect", cidrs: single, nodes: []*v1.Node{node1, node2},
			routes: []*cloudprovider.Route{route("node-1", "10.120.0.0/24", "10.0.1.1"), route("node-3", "10.120.2.0/24", "10.0.2.1")},
			want:   singleExpected, unavailable: map[string]bool{"node-1": false, "node-2": false}, creates: 1, deletes: 1,
		},
		{
			name: "single, a node without CIDR is left alone", cidrs: single, nodes: []*v1.Node{node1, nodeNoCIDR},
			want: []string{"node-1 10.120.0.0/24 10.0.1.1"}, unavailable: map[string]bool{"node-1": false}, creates: 1,
		},
		{
			name: "a node without CIDR but with a stale route is unavailable", cidrs: single, nodes: []*v1.Node{node1, nodeNoCIDR},
			routes: []*cloudprovider.Route{route("node-1", "10.120.0.0/24", "10.0.1.1"), route("node-2", "10.120.1.0/24", "10.0.5.1")},
			want:   []string{"node-1 10.120.0.0/24 10.0.1.1"}, unavailable: map[string]bool{"node-1": false, "node-2": true}, deletes: 1,
		},
		{
			name: "blackhole route in range is deleted", cidrs: single, nodes: []*v1.Node{node1, node2},
			routes: []*cloudprovider.Route{
				route("node-1", "10.120.0.0/24", "10.0.1.1"), route("node-2", "10.120.1.0/24", "10.0.2.1"),
				blackhole(route("", "10.120.2.0/24", "10.0.100.1")),
			},
			want: singleExpected, unavailable: map[string]bool{"node-1": false, "node-2": false}, deletes: 1,
		},
		{
			name: "blackhole route of a known node and CIDR is replaced", cidrs: single, nodes: []*v1.Node{node1},
			routes: []*cloudprovider.Route{blackhole(route("node-1", "10.120.0.0/24", "10.0.1.1"))},
			// Upstream counts the blackhole route as present, deletes it and reports
			// RouteCreated; we create the route again in the same reconcile.
			want: []string{"node-1 10.120.0.0/24 10.0.1.1"}, unavailable: map[string]bool{"node-1": false}, creates: 1, deletes: 1,
		},
		{
			name: "blackhole route out of range is kept", cidrs: single, nodes: []*v1.Node{node1, node2},
			routes: []*cloudprovider.Route{
				route("node-1", "10.120.0.0/24", "10.0.1.1"), route("node-2", "10.120.1.0/24", "10.0.2.1"),
				blackhole(route("", "10.1.2.0/24", "10.0.100.1")),
			},
			want:        append([]string{" 10.1.2.0/24 10.0.100.1 blackhole"}, singleExpected...),
			unavailable: map[string]bool{"node-1": false, "node-2": false},
		},
		{
			name: "routes out of range are untouched", cidrs: single, nodes: []*v1.Node{node1},
			routes: []*cloudprovider.Route{
				route("node-1", "10.120.0.0/24", "10.0.1.1"),
				route("gone", "192.168.0.0/24", "10.0.9.1"), route("node-1", "10.121.0.0/24", "10.0.1.1"),
				route("", "10.0.0.0/8", ""), route("node-1", "garbage", ""),
			},
			want: []string{
				" 10.0.0.0/8 ", "gone 192.168.0.0/24 10.0.9.1", "node-1 10.120.0.0/24 10.0.1.1",
				"node-1 10.121.0.0/24 10.0.1.1", "node-1 garbage ",
			},
			unavailable: map[string]bool{"node-1": false},
		},
		{
			name: "routes of a foreign node are untouched", cidrs: single, nodes: []*v1.Node{node1}, foreign: []string{"other"},
			routes:      []*cloudprovider.Route{route("node-1", "10.120.0.0/24", "10.0.1.1"), route("other", "10.120.9.0/24", "10.0.9.1")},
			want:        []string{"node-1 10.120.0.0/24 10.0.1.1", "other 10.120.9.0/24 10.0.9.1"},
			unavailable: map[string]bool{"node-1": false},
		},
		{
			name: "duplicate pod CIDR yields one route", cidrs: single, nodes: []*v1.Node{nodeDup},
			want: []string{"node-4 10.120.1.0/24 10.0.4.1"}, unavailable: map[string]bool{"node-4": false}, creates: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := computePlan(input{nodes: tt.nodes, foreign: sets.New(tt.foreign...), routes: tt.routes, clusterCIDRs: tt.cidrs})
			if len(p.creates) != tt.creates || len(p.deletes) != tt.deletes {
				t.Errorf("creates/deletes = %d/%d, want %d/%d", len(p.creates), len(p.deletes), tt.creates, tt.deletes)
			}
			want := slices.Sorted(slices.Values(tt.want))
			if diff := cmp.Diff(want, applyPlan(tt.routes, p)); diff != "" {
				t.Errorf("routes after the plan (-want +got):\n%s", diff)
			}
			for _, c := range p.creates {
				if c.nameHint != string(c.node.UID) {
					t.Errorf("name hint %q, want the node UID %q", c.nameHint, c.node.UID)
				}
				p.nodes[c.node.Name][c.route.DestinationCIDR] = actionKeep // every create succeeds
			}
			got := map[string]bool{}
			for name, actions := range p.nodes {
				got[name] = networkUnavailable(actions)
			}
			if diff := cmp.Diff(tt.unavailable, got); diff != "" {
				t.Errorf("NetworkUnavailable per node (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNetworkUnavailable(t *testing.T) {
	tests := []struct {
		name    string
		actions map[string]action
		want    bool
	}{
		{"routes but no CIDR", map[string]action{}, true},
		{"all kept", map[string]action{"a": actionKeep, "b": actionKeep}, false},
		{"one failed add", map[string]action{"a": actionKeep, "b": actionAdd}, true},
		{"one failed replace", map[string]action{"a": actionReplace}, true},
	}
	for _, tt := range tests {
		if got := networkUnavailable(tt.actions); got != tt.want {
			t.Errorf("%s: networkUnavailable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRoutesAffected(t *testing.T) {
	// Upstream's TestHandleNodeUpdate cases, plus ownership changes.
	base := testNode("node-1", "10.0.1.1", "10.120.0.0/24")
	base.ResourceVersion = "1"
	tests := []struct {
		name   string
		change func(n *v1.Node)
		want   bool
	}{
		{"internal IP changed", func(n *v1.Node) { n.Status.Addresses = addrs("10.0.1.2") }, true},
		{"address order changed", func(n *v1.Node) {
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: "n1"})
		}, true},
		{"pod CIDR changed", func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.121.0.0/24"} }, true},
		{"provider ID set", func(n *v1.Node) { n.Spec.ProviderID = "fake://1" }, true},
		{"label changed", func(n *v1.Node) { n.Labels = map[string]string{"a": "b"} }, true},
		{"resync (identical)", func(*v1.Node) {}, false},
		{"unrelated change", func(n *v1.Node) {
			n.ResourceVersion = "2"
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
			n.Annotations = map[string]string{"x": "y"}
		}, false},
	}
	for _, tt := range tests {
		updated := base.DeepCopy()
		tt.change(updated)
		if got := routesAffected(base, updated); got != tt.want {
			t.Errorf("%s: routesAffected = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestForEachCapsConcurrency(t *testing.T) {
	const items, limit = 20, 3
	var mu sync.Mutex
	inFlight, peak, calls := 0, 0, 0
	release := make(chan struct{})
	errs := forEach(make([]int, items), limit, func(int) error {
		mu.Lock()
		inFlight++
		calls++
		peak = max(peak, inFlight)
		if inFlight == limit && calls == limit {
			close(release) // the cap is reached: let everybody finish
		}
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		if calls%2 == 0 {
			return errors.New("odd")
		}
		return nil
	})
	if peak != limit {
		t.Errorf("peak concurrency = %d, want %d", peak, limit)
	}
	if len(errs) != items || calls != items {
		t.Errorf("%d results for %d calls, want %d", len(errs), calls, items)
	}
}

func TestSummarize(t *testing.T) {
	if err := summarize("ops", []error{nil, nil}); err != nil {
		t.Errorf("summarize of successes = %v", err)
	}
	boom := errors.New("boom")
	err := summarize("route creations", []error{nil, boom, errors.New("bang")})
	if !errors.Is(err, boom) || err.Error() != "2 of 3 route creations failed, first: boom" {
		t.Errorf("summarize = %v", err)
	}
}
