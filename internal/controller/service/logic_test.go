package service

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/stratus-ccm/stratus/pkg/echo"
)

// upstream behavior B16: the backend predicates.
func TestIsBackend(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		desc string
		node v1.Node
		want bool
	}{
		{"plain", v1.Node{}, true},
		{"exclude true", v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExcludeFromLB: "true"}}}, false},
		{"exclude empty", v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExcludeFromLB: ""}}}, false},
		{"exclude garbage", v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExcludeFromLB: "yes"}}}, false},
		{"exclude false", v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExcludeFromLB: "false"}}}, true},
		{"exclude 0", v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExcludeFromLB: "0"}}}, true},
		{"exclude F", v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExcludeFromLB: "F"}}}, true},
		{"exclude FALSE", v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelExcludeFromLB: "FALSE"}}}, true},
		{"autoscaler taint", v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: TaintToBeDeleted, Value: "123", Effect: v1.TaintEffectNoSchedule}}}}, false},
		{"being deleted", v1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
		{"not ready", v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}}}, true},
		{"cordoned", v1.Node{Spec: v1.NodeSpec{Unschedulable: true}}, true},
		{"uninitialized", v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: v1.TaintEffectNoSchedule}}}}, true},
		{"no provider ID", v1.Node{Spec: v1.NodeSpec{ProviderID: ""}}, true},
		{"control plane role", v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}, true},
	}
	for _, tt := range tests {
		if got := IsBackend(&tt.node); got != tt.want {
			t.Errorf("%s: IsBackend = %v, want %v", tt.desc, got, tt.want)
		}
	}
}

// upstream behavior B17 and the coalescing difference: which node updates can
// change a backend set.
func TestBackendChanged(t *testing.T) {
	base := func() *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}}, Spec: v1.NodeSpec{ProviderID: "fake://n"}}
	}
	now := metav1.Now()
	tests := []struct {
		desc string
		fn   func(*v1.Node)
		want bool
	}{
		{"nothing", func(*v1.Node) {}, false},
		{"exclusion label true", func(n *v1.Node) { n.Labels[LabelExcludeFromLB] = "true" }, true},
		{"exclusion label false", func(n *v1.Node) { n.Labels[LabelExcludeFromLB] = "false" }, false},
		{"autoscaler taint", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: TaintToBeDeleted}} }, true},
		{"deletion timestamp", func(n *v1.Node) { n.DeletionTimestamp = &now }, true},
		{"provider ID changed", func(n *v1.Node) { n.Spec.ProviderID = "fake://m" }, true},
		{"provider ID unset", func(n *v1.Node) { n.Spec.ProviderID = "" }, true},
		{"readiness", func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
		}, false},
		{"other taint", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "x"}} }, false},
		{"other label", func(n *v1.Node) { n.Labels["a"] = "c" }, false},
		{"cordon", func(n *v1.Node) { n.Spec.Unschedulable = true }, false},
		{"addresses", func(n *v1.Node) {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}
		}, false},
	}
	for _, tt := range tests {
		old, new := base(), base()
		tt.fn(new)
		if got := backendChanged(old, new, nil); got != tt.want {
			t.Errorf("%s: backendChanged = %v, want %v", tt.desc, got, tt.want)
		}
		if got := backendChanged(new, old, nil); got != tt.want {
			t.Errorf("%s (reverse): backendChanged = %v, want %v", tt.desc, got, tt.want)
		}
	}
}

// A joining node named from the instance listing is a backend under that
// provider ID already: its initialization to the same ID is no backend
// change (it would hold back the pass of a burst), to another ID it is.
func TestBackendChangedListedJoiningNode(t *testing.T) {
	joiningNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: v1.NodeSpec{
		Taints: []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: v1.TaintEffectNoSchedule}},
	}}
	initialized := func(id string) *v1.Node {
		n := joiningNode.DeepCopy()
		n.Spec.Taints, n.Spec.ProviderID = nil, id
		return n
	}
	listedAs := func(id string) func(*v1.Node) string { return func(*v1.Node) string { return id } }
	tests := []struct {
		desc   string
		listed func(*v1.Node) string
		new    *v1.Node
		want   bool
	}{
		{"listed, initialized to the listed ID", listedAs("mc://i-1"), initialized("mc://i-1"), false},
		{"listed, initialized to another ID", listedAs("mc://i-1"), initialized("mc://i-2"), true},
		{"not listed, initialized", listedAs(""), initialized("mc://i-1"), true},
		{"no listing, initialized", nil, initialized("mc://i-1"), true},
		{"listed, still joining", listedAs("mc://i-1"), joiningNode.DeepCopy(), false},
	}
	for _, tt := range tests {
		if got := backendChanged(joiningNode, tt.new, tt.listed); got != tt.want {
			t.Errorf("%s: backendChanged = %v, want %v", tt.desc, got, tt.want)
		}
	}
}

// upstream behavior B18: the needsUpdate truth table.
func TestNeedsUpdate(t *testing.T) {
	base := func() *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1", Annotations: map[string]string{"a": "b"}, Labels: map[string]string{"l": "1"}},
			Spec: v1.ServiceSpec{
				Type:                  v1.ServiceTypeLoadBalancer,
				Ports:                 []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
				ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
				IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
				ExternalIPs:           []string{"192.0.2.1"},
			},
		}
	}
	tests := []struct {
		desc string
		old  func(*v1.Service)
		fn   func(*v1.Service)
		want bool
	}{
		{"nothing", nil, func(*v1.Service) {}, false},
		{"type to ClusterIP", nil, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }, true},
		{"neither wants LB", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP },
			func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort; s.Annotations["x"] = "y" }, false},
		{"source ranges", nil, func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} }, true},
		{"port added", nil, func(s *v1.Service) { s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Port: 443}) }, true},
		{"port number", nil, func(s *v1.Service) { s.Spec.Ports[0].Port = 81 }, true},
		{"port name", nil, func(s *v1.Service) { s.Spec.Ports[0].Name = "web" }, true},
		{"port protocol", nil, func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolUDP }, true},
		{"node port", nil, func(s *v1.Service) { s.Spec.Ports[0].NodePort = 30081 }, true},
		{"target port", nil, func(s *v1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(9090) }, true},
		{"appProtocol set", nil, func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("http") }, true},
		{"appProtocol same", func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("http") },
			func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("http") }, false},
		{"appProtocol changed", func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("http") },
			func(s *v1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("https") }, true},
		{"session affinity", nil, func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }, true},
		{"session affinity config", nil, func(s *v1.Service) {
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		}, true},
		{"load balancer IP", nil, func(s *v1.Service) { s.Spec.LoadBalancerIP = "192.0.2.9" }, true},
		{"external IP count", nil, func(s *v1.Service) { s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, "192.0.2.2") }, true},
		{"external IP value", nil, func(s *v1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.3"} }, true},
		{"annotation only", nil, func(s *v1.Service) { s.Annotations["a"] = "c" }, true},
		{"UID", nil, func(s *v1.Service) { s.UID = "u2" }, true},
		{"ETP", nil, func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }, true},
		{"health check node port", nil, func(s *v1.Service) { s.Spec.HealthCheckNodePort = 30500 }, true},
		{"IP families 1 to 2", nil, func(s *v1.Service) { s.Spec.IPFamilies = append(s.Spec.IPFamilies, v1.IPv6Protocol) }, true},
		{"IP family swapped", nil, func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }, false},
		{"labels", nil, func(s *v1.Service) { s.Labels["l"] = "2" }, false},
		{"selector", nil, func(s *v1.Service) { s.Spec.Selector = map[string]string{"x": "y"} }, false},
		{"status", nil, func(s *v1.Service) { s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "1.2.3.4"}} }, false},
		{"finalizers", nil, func(s *v1.Service) { s.Finalizers = []string{Finalizer} }, false},
		{"allocateLoadBalancerNodePorts", nil, func(s *v1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }, false},
		{"internal traffic policy", nil, func(s *v1.Service) { s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal) }, false},
	}
	for _, tt := range tests {
		old, new := base(), base()
		if tt.old != nil {
			tt.old(old)
			tt.old(new)
		}
		tt.fn(new)
		if got := needsUpdate(old, new); got != tt.want {
			t.Errorf("%s: needsUpdate = %v, want %v", tt.desc, got, tt.want)
		}
	}
}

func TestNeedsCleanup(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		desc string
		svc  v1.Service
		want bool
	}{
		{"LB without finalizer", v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}, false},
		{"LB with finalizer", v1.Service{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{Finalizer}}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}, false},
		{"ClusterIP with finalizer", v1.Service{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{Finalizer}}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP}}, true},
		{"ClusterIP without finalizer", v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP}}, false},
		{"deleted LB with finalizer", v1.Service{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{Finalizer}, DeletionTimestamp: &now},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}, true},
	}
	for _, tt := range tests {
		if got := needsCleanup(&tt.svc); got != tt.want {
			t.Errorf("%s: needsCleanup = %v, want %v", tt.desc, got, tt.want)
		}
	}
}

func TestIngressEqual(t *testing.T) {
	vip, proxy := ptr.To(v1.LoadBalancerIPModeVIP), ptr.To(v1.LoadBalancerIPModeProxy)
	st := func(in ...v1.LoadBalancerIngress) *v1.LoadBalancerStatus { return &v1.LoadBalancerStatus{Ingress: in} }
	tests := []struct {
		desc string
		a, b *v1.LoadBalancerStatus
		want bool
	}{
		{"both empty", st(), st(), true},
		{"ip differs", st(v1.LoadBalancerIngress{IP: "1.1.1.1"}), st(v1.LoadBalancerIngress{IP: "1.1.1.2"}), false},
		{"nil ipMode is VIP", st(v1.LoadBalancerIngress{IP: "1.1.1.1"}), st(v1.LoadBalancerIngress{IP: "1.1.1.1", IPMode: vip}), true},
		{"ipMode differs", st(v1.LoadBalancerIngress{IP: "1.1.1.1", IPMode: proxy}), st(v1.LoadBalancerIngress{IP: "1.1.1.1", IPMode: vip}), false},
		{"hostname", st(v1.LoadBalancerIngress{Hostname: "a.example"}), st(v1.LoadBalancerIngress{Hostname: "b.example"}), false},
		{"hostname without ipMode", st(v1.LoadBalancerIngress{Hostname: "a.example"}), st(v1.LoadBalancerIngress{Hostname: "a.example"}), true},
		{"ports", st(v1.LoadBalancerIngress{IP: "1.1.1.1", Ports: []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolTCP}}}),
			st(v1.LoadBalancerIngress{IP: "1.1.1.1", Ports: []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolUDP}}}), false},
		{"count", st(v1.LoadBalancerIngress{IP: "1.1.1.1"}), st(v1.LoadBalancerIngress{IP: "1.1.1.1"}, v1.LoadBalancerIngress{IP: "::1"}), false},
	}
	for _, tt := range tests {
		if got := ingressEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: ingressEqual = %v, want %v", tt.desc, got, tt.want)
		}
	}
	a := st(v1.LoadBalancerIngress{IP: "1.1.1.1"})
	normalizeStatus(a)
	if a.Ingress[0].IPMode != nil {
		t.Error("normalizeStatus modified its argument")
	}
}

func TestSameAddresses(t *testing.T) {
	st := func(in ...v1.LoadBalancerIngress) *v1.LoadBalancerStatus { return &v1.LoadBalancerStatus{Ingress: in} }
	full := st(v1.LoadBalancerIngress{IP: "1.1.1.1", IPMode: ptr.To(v1.LoadBalancerIPModeVIP), Ports: []v1.PortStatus{{Port: 80}}})
	tests := []struct {
		desc string
		a, b *v1.LoadBalancerStatus
		want bool
	}{
		{"less detail is no drift", st(v1.LoadBalancerIngress{IP: "1.1.1.1"}), full, true},
		{"other IP", st(v1.LoadBalancerIngress{IP: "1.1.1.2"}), full, false},
		{"hostname instead", st(v1.LoadBalancerIngress{Hostname: "lb.example"}), full, false},
		{"missing entry", st(), full, false},
		{"extra entry", st(v1.LoadBalancerIngress{IP: "1.1.1.1"}, v1.LoadBalancerIngress{IP: "::1"}), full, false},
	}
	for _, tt := range tests {
		if got := sameAddresses(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: sameAddresses = %v, want %v", tt.desc, got, tt.want)
		}
	}
}

// The UpdateLoadBalancerFailed event lists up to maxNodeNames hosts and says
// "limited" only when it left some out.
func TestEventHosts(t *testing.T) {
	var nodes []*v1.Node
	for i := range 25 {
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%02d", 24-i)}})
	}
	for _, tc := range []struct {
		nodes []*v1.Node
		want  string
	}{
		{nodes[:2], "[n23 n24]"},
		{nodes[:maxNodeNames], "[n05 n06 n07 n08 n09 n10 n11 n12 n13 n14 n15 n16 n17 n18 n19 n20 n21 n22 n23 n24]"},
		{nodes, "[n05 n06 n07 n08 n09 n10 n11 n12 n13 n14 n15 n16 n17 n18 n19 n20 n21 n22 n23 n24 <5 more>] [node names limited, total number of nodes: 25]"},
	} {
		if got := eventHosts(tc.nodes); got != tc.want {
			t.Errorf("eventHosts(%d nodes) = %s\nwant %s", len(tc.nodes), got, tc.want)
		}
	}
}

func TestOptions(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Workers: 10, ClusterName: "kubernetes", NodeUpdateWindow: DefaultNodeUpdateWindow, NodeInitWait: DefaultNodeInitWait, ResyncPeriod: DefaultResyncPeriod,
		OrphanGracePeriod: DefaultOrphanGracePeriod, RetryBaseDelay: DefaultRetryBaseDelay, RetryMaxDelay: DefaultRetryMaxDelay, Clock: clock.RealClock{}}
	if o != want {
		t.Errorf("defaults = %+v, want %+v", o, want)
	}
	for _, bad := range []struct {
		opts Options
		name string
	}{
		{Options{Workers: -1}, "--concurrent-service-syncs"},
		{Options{ResyncPeriod: -1}, "--load-balancer-resync-period"},
		{Options{NodeUpdateWindow: -1}, "NodeUpdateWindow"},
		{Options{OrphanGracePeriod: -1}, "OrphanGracePeriod"},
		{Options{RetryBaseDelay: 10 * DefaultRetryMaxDelay}, "RetryMaxDelay"},
	} {
		_, err := bad.opts.withDefaults()
		if err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("withDefaults(%+v) = %v; want an error naming %s", bad.opts, err, bad.name)
		}
	}
}

// The invalid-configuration log line lists at most maxLoggedNames names, each
// shortened.
func TestShortenAll(t *testing.T) {
	var names []string
	for i := range 12 {
		names = append(names, fmt.Sprintf("n%02d", i))
	}
	long := strings.Repeat("x", 300)
	got := shortenAll(append([]string{long}, names...))
	want := append([]string{strings.Repeat("x", echo.MaxName) + "...[300 bytes]"}, names[:9]...)
	want = append(want, "(3 more)")
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("shortenAll = %v\nwant %v", got, want)
	}
	if got := shortenAll(names[:2]); strings.Join(got, ",") != "n00,n01" {
		t.Errorf("shortenAll of two = %v", got)
	}
}

// A Service ensured as remembered keeps one copy in the cache; one that
// changed during the sync (another port) keeps its own.
func TestEnsuredFromSharesTheRememberedCopy(t *testing.T) {
	c := newServiceCache()
	svc := lbService("web", func(s *v1.Service) { s.Namespace, s.UID = "ns", "u1" })
	c.remember(svc.DeepCopy(), nil)
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	patched := svc.DeepCopy()
	patched.Finalizers = []string{Finalizer} // the finalizer patch; same load balancer
	c.update(key, func(e *svcState) { e.ensuredFrom(patched) })
	if e, _ := c.get(key); e.ensuredSvc != e.svc {
		t.Error("the ensured Service is a second copy of the remembered one")
	}
	changed := svc.DeepCopy()
	changed.Spec.Ports[0].Port = 8443
	c.update(key, func(e *svcState) { e.ensuredFrom(changed) })
	e, _ := c.get(key)
	if e.ensuredSvc == e.svc || e.ensuredSvc == changed || e.ensuredSvc.Spec.Ports[0].Port != 8443 {
		t.Errorf("a changed Service: ensured %p (port %d), remembered %p; want a private copy of the change", e.ensuredSvc, e.ensuredSvc.Spec.Ports[0].Port, e.svc)
	}
}

// A backend pass waits while node changes keep coming, until they pause for
// a window, but at most burstHoldWindows windows after the first.
func TestNodeBurstHold(t *testing.T) {
	const w = time.Second
	t0 := time.Unix(1000, 0)
	var b nodeBurst
	if got := b.hold(t0, w); got != 0 {
		t.Errorf("no changes: hold %v, want 0", got)
	}
	b.touch(t0)
	b.touch(t0.Add(w / 2))
	if got := b.hold(t0.Add(w), w); got != w/2 {
		t.Errorf("a change half a window ago: hold %v, want %v", got, w/2)
	}
	if got := b.hold(t0.Add(2*w), w); got != 0 {
		t.Errorf("changes paused for a window: hold %v, want 0", got)
	}
	// A steady stream: held back at most burstHoldWindows windows.
	start := t0.Add(time.Hour)
	for i := range 4 * burstHoldWindows {
		b.touch(start.Add(time.Duration(i) * w / 4))
	}
	if got := b.hold(start.Add(burstHoldWindows*w), w); got != 0 {
		t.Errorf("after %d windows of changes: hold %v, want 0", burstHoldWindows, got)
	}
}
