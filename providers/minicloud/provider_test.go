package minicloud

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

const cluster = "test-cluster"

// startCloud runs a minicloud and returns it with the provider built the
// way a manager builds it: from the registry, with a cloud config whose
// token is in a file.
func startCloud(t *testing.T, o minicloudtest.Options) (*minicloudtest.Cloud, *Cloud) {
	t.Helper()
	return startCloudConf(t, o, "")
}

// startCloudConf is startCloud with more cloud-config lines (extra).
func startCloudConf(t *testing.T, o minicloudtest.Options, extra string) (*minicloudtest.Cloud, *Cloud) {
	t.Helper()
	mc := minicloudtest.Start(t, o)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(mc.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("url: %s\ntokenFile: %s\ntimeout: 10s\n", mc.URL, tokenFile) + extra
	raw, err := cloudprovider.GetCloudProvider(ProviderName, strings.NewReader(conf))
	if err != nil || raw == nil {
		t.Fatalf("GetCloudProvider(%q) = %v, %v", ProviderName, raw, err)
	}
	return mc, raw.(*Cloud)
}

func createInstance(t *testing.T, mc *minicloudtest.Cloud, name string, public bool) *api.Instance {
	t.Helper()
	inst, err := mc.Client.CreateInstance(context.Background(), api.InstanceCreate{Name: name, Type: "mc.small", Zone: "mc-central-b", PublicIP: public})
	if err != nil {
		t.Fatalf("create instance %s: %v", name, err)
	}
	return inst
}

func node(name, providerID string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}}
}

func TestInstances(t *testing.T) {
	ctx := context.Background()
	mc, c := startCloud(t, minicloudtest.Options{})
	inst, _ := c.InstancesV2()
	// A dual-stack instance with labels: its metadata carries both
	// InternalIPs (IPv4 first) and the labels as additional labels.
	running, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: "running", Type: "mc.small", Zone: "mc-central-b", PublicIP: true, IPv6: true,
		Labels: map[string]string{"example.com/team": "a", "kubernetes.io/x": "y"}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := createInstance(t, mc, "stopped", false)
	deleted := createInstance(t, mc, "deleted", false)
	if _, err := mc.Client.StopInstance(ctx, stopped.ID); err != nil {
		t.Fatal(err)
	}
	if err := mc.Client.DeleteInstance(ctx, deleted.ID); err != nil {
		t.Fatal(err)
	}

	wantRunning := &cloudprovider.InstanceMetadata{
		ProviderID:   "minicloud://" + running.ID,
		InstanceType: "mc.small",
		NodeAddresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: running.PrivateIP},
			{Type: v1.NodeInternalIP, Address: running.PrivateIPv6},
			{Type: v1.NodeExternalIP, Address: running.PublicIP},
			{Type: v1.NodeHostName, Address: "running"},
		},
		Zone:   "mc-central-b",
		Region: "mc-central",
		// The provider reports every label; the node controller filters
		// those in Kubernetes namespaces.
		AdditionalLabels: map[string]string{"example.com/team": "a", "kubernetes.io/x": "y"},
	}
	if running.PrivateIPv6 == "" {
		t.Fatal("dual-stack instance without an IPv6 address")
	}
	for _, tc := range []struct {
		name         string
		node         *v1.Node
		wantMeta     *cloudprovider.InstanceMetadata
		wantExists   bool
		wantShutdown bool
	}{
		{"running by provider ID", node("other-name", "minicloud://"+running.ID), wantRunning, true, false},
		{"running by name", node("running", ""), wantRunning, true, false},
		{"stopped by provider ID", node("stopped", "minicloud://"+stopped.ID), nil, true, true},
		{"stopped by name", node("stopped", ""), nil, true, true},
		{"deleted by provider ID", node("deleted", "minicloud://"+deleted.ID), nil, false, false},
		{"deleted by name", node("deleted", ""), nil, false, false},
		{"never existed", node("ghost", ""), nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exists, err := inst.InstanceExists(ctx, tc.node)
			if err != nil || exists != tc.wantExists {
				t.Errorf("InstanceExists = %v, %v; want %v", exists, err, tc.wantExists)
			}
			shutdown, err := inst.InstanceShutdown(ctx, tc.node)
			if err != nil || shutdown != tc.wantShutdown {
				t.Errorf("InstanceShutdown = %v, %v; want %v", shutdown, err, tc.wantShutdown)
			}
			md, err := inst.InstanceMetadata(ctx, tc.node)
			switch {
			case !tc.wantExists:
				if !errors.Is(err, cloudprovider.InstanceNotFound) {
					t.Errorf("InstanceMetadata error = %v, want InstanceNotFound", err)
				}
			case err != nil:
				t.Errorf("InstanceMetadata: %v", err)
			case tc.wantMeta != nil:
				if diff := cmp.Diff(tc.wantMeta, md); diff != "" {
					t.Errorf("InstanceMetadata (-want +got):\n%s", diff)
				}
			}
		})
	}
	if _, err := inst.InstanceMetadata(ctx, node("n", "aws:///i-1")); err == nil || !strings.Contains(err.Error(), `"aws:///i-1"`) {
		t.Errorf("foreign provider ID: error = %v, want one naming it", err)
	}
	// The batched listing reports the same metadata.
	listed, err := inst.(stratus.InstanceLister).ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range listed {
		if l.Name == "running" {
			if diff := cmp.Diff(*wantRunning, l.Metadata); diff != "" {
				t.Errorf("listed metadata (-want +got):\n%s", diff)
			}
		}
	}
}

func TestListInstancesAcrossPages(t *testing.T) {
	defer func(n int) { listPageSize = n }(listPageSize)
	listPageSize = 2
	ctx := context.Background()
	mc, c := startCloud(t, minicloudtest.Options{})
	want := map[string]bool{}
	for i := range 5 {
		in := createInstance(t, mc, fmt.Sprintf("n%d", i), false)
		want[in.ID] = i == 3
		if i == 3 {
			mc.Client.StopInstance(ctx, in.ID)
		}
	}
	v2, _ := c.InstancesV2()
	got, err := v2.(stratus.InstanceLister).ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListInstances returned %d instances, want %d", len(got), len(want))
	}
	for _, in := range got {
		id, err := InstanceIDOf(in.Metadata.ProviderID)
		if err != nil {
			t.Fatal(err)
		}
		shutdown, ok := want[id]
		if !ok || in.Shutdown != shutdown || in.Metadata.Zone != "mc-central-b" || !strings.HasPrefix(in.Name, "n") {
			t.Errorf("listed %+v; want shutdown=%v (known: %v)", in, shutdown, ok)
		}
	}
}

// lbFixture is a cloud with two node instances, each running a backend on
// the same port (the NodePort) and an HTTP health endpoint.
type lbFixture struct {
	mc         *minicloudtest.Cloud
	cloud      *Cloud
	lb         cloudprovider.LoadBalancer
	nodes      []*v1.Node
	backends   []*minicloudtest.Backend
	nodePort   int32
	healthPort int32
}

func newLBFixture(t *testing.T) *lbFixture {
	return newLBFixtureWith(t, minicloudtest.BackendOptions{})
}

// newLBFixtureWith is newLBFixture with backends that also have o's
// settings (ProxyProtocol).
func newLBFixtureWith(t *testing.T, o minicloudtest.BackendOptions) *lbFixture {
	return newLBFixtureConf(t, o, "")
}

// newLBFixtureConf is newLBFixtureWith with more cloud-config lines.
func newLBFixtureConf(t *testing.T, o minicloudtest.BackendOptions, extra string) *lbFixture {
	mc, c := startCloudConf(t, minicloudtest.Options{LBProvisionDelay: 200 * time.Millisecond}, extra)
	lb, _ := c.LoadBalancer()
	f := &lbFixture{mc: mc, cloud: c, lb: lb}
	healthPort := testsupport.FreePort(t)
	for i, name := range []string{"node-a", "node-b"} {
		inst := createInstance(t, mc, name, false)
		be := minicloudtest.StartBackend(t, name, inst.PrivateIP, minicloudtest.BackendOptions{TCP: true, UDP: true, Port: int(f.nodePort), HealthPort: healthPort, ProxyProtocol: o.ProxyProtocol})
		if i == 0 {
			f.nodePort = int32(be.Port)
		}
		f.backends = append(f.backends, be)
		f.nodes = append(f.nodes, node(name, ProviderID(inst.ID)))
	}
	f.healthPort = int32(healthPort)
	return f
}

func (f *lbFixture) service(port int32) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("0b6e1f3a-5c1e-4c9b-9d7e-2f1a3b4c5d6e")},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: port, NodePort: f.nodePort}},
		},
	}
}

// ensure calls EnsureLoadBalancer until the load balancer is active,
// checking that it asks for a retry while provisioning.
func (f *lbFixture) ensure(t *testing.T, clusterName string, svc *v1.Service, nodes []*v1.Node) *v1.LoadBalancerStatus {
	t.Helper()
	return f.ensureIn(t, context.Background(), clusterName, svc, nodes)
}

// ensureCtx is ensure in the test cluster with the marks of ctx.
func (f *lbFixture) ensureCtx(t *testing.T, ctx context.Context, svc *v1.Service, nodes []*v1.Node) *v1.LoadBalancerStatus {
	t.Helper()
	return f.ensureIn(t, ctx, cluster, svc, nodes)
}

func (f *lbFixture) ensureIn(t *testing.T, base context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) *v1.LoadBalancerStatus {
	t.Helper()
	var st *v1.LoadBalancerStatus
	err := wait.PollUntilContextTimeout(base, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		st, err = f.lb.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
		var re *cloudproviderapi.RetryError
		if errors.As(err, &re) {
			if re.RetryAfter() != ProvisioningRetry {
				return false, fmt.Errorf("RetryAfter = %v", re.RetryAfter())
			}
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	return st
}

// waitBackends waits until connections through addr reach exactly the
// named backends.
func waitBackends(t *testing.T, addr string, want ...string) {
	t.Helper()
	wantSet := map[string]bool{}
	for _, w := range want {
		wantSet[w] = true
	}
	var last map[string]bool
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		last = map[string]bool{}
		for range 6 {
			name, c, err := minicloudtest.DialTCP(addr, "")
			if err != nil {
				return false, nil
			}
			c.Close()
			last[name] = true
		}
		return cmp.Equal(last, wantSet), nil
	})
	if err != nil {
		t.Fatalf("traffic through %s reaches %v, want %v", addr, last, want)
	}
}

func TestLoadBalancerLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)

	// Create: provisioning answers RetryError, then the status of the VIP.
	if _, err := f.lb.EnsureLoadBalancer(ctx, cluster, svc, f.nodes); !errors.As(err, new(*cloudproviderapi.RetryError)) {
		t.Fatalf("first EnsureLoadBalancer error = %v, want a RetryError while provisioning", err)
	}
	st := f.ensure(t, cluster, svc, f.nodes)
	lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("cloud has load balancers %+v (%v), want exactly one", lbs, err)
	}
	vip := lbs[0].VIP
	mode := v1.LoadBalancerIPModeVIP
	want := &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: vip, IPMode: &mode, Ports: []v1.PortStatus{{Port: 8080, Protocol: v1.ProtocolTCP}}}}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{TagCluster: cluster, TagServiceNamespace: "default", TagServiceName: "web", TagServiceUID: string(svc.UID)}, lbs[0].Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	if lbs[0].Name != f.lb.GetLoadBalancerName(ctx, cluster, svc) || lbs[0].HealthCheck.Protocol != api.ProtocolTCP || lbs[0].HealthCheck.Port != int(f.nodePort) {
		t.Errorf("load balancer %+v: want name %s and a TCP health check on the node port", lbs[0], f.lb.GetLoadBalancerName(ctx, cluster, svc))
	}
	got, exists, err := f.lb.GetLoadBalancer(ctx, cluster, svc)
	if err != nil || !exists || !cmp.Equal(got, want) {
		t.Errorf("GetLoadBalancer = %+v, %v, %v; want %+v", got, exists, err, want)
	}
	addr := net.JoinHostPort(vip, "8080")
	waitBackends(t, addr, "node-a", "node-b")

	// Ensuring again creates nothing and leaves the load balancer as it was
	// (the provider knows its ID: one update of the same spec, no lookup).
	if _, err := f.lb.EnsureLoadBalancer(ctx, cluster, svc, f.nodes); err != nil {
		t.Fatal(err)
	}
	again, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(again) != 1 {
		t.Fatalf("after a repeated ensure: %+v, %v; want one load balancer", again, err)
	}
	if diff := cmp.Diff(lbs[0], again[0], cmpopts.IgnoreFields(api.LoadBalancer{}, "UpdatedAt", "TargetHealth")); diff != "" {
		t.Errorf("after a repeated ensure (-before +after):\n%s", diff)
	}

	// Node change: UpdateLoadBalancer drops node-b.
	if err := f.lb.UpdateLoadBalancer(ctx, cluster, svc, f.nodes[:1]); err != nil {
		t.Fatal(err)
	}
	waitBackends(t, addr, "node-a")

	// Port change: the listener moves; both nodes again.
	svc.Spec.Ports[0].Port = 9090
	st = f.ensure(t, cluster, svc, f.nodes)
	if st.Ingress[0].Ports[0].Port != 9090 {
		t.Errorf("status ports = %+v, want 9090", st.Ingress[0].Ports)
	}
	waitBackends(t, net.JoinHostPort(vip, "9090"), "node-a", "node-b")
	if !minicloudtest.Refused(addr) {
		t.Errorf("old listener %s still accepts connections", addr)
	}

	// UDP listener next to TCP.
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 5353, NodePort: f.nodePort})
	f.ensure(t, cluster, svc, f.nodes)
	if ans, err := minicloudtest.AskUDP(net.JoinHostPort(vip, "5353"), "ping"); err != nil || !strings.HasSuffix(ans, ":ping") {
		t.Errorf("UDP through the VIP answered %q, %v", ans, err)
	}

	// Delete, twice.
	for range 2 {
		if err := f.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
			t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
		}
	}
	if _, exists, err := f.lb.GetLoadBalancer(ctx, cluster, svc); exists || err != nil {
		t.Errorf("GetLoadBalancer after delete = exists %v, %v", exists, err)
	}
	if !minicloudtest.Refused(net.JoinHostPort(vip, "9090")) {
		t.Error("VIP still accepts connections after delete")
	}

	// Re-creating with the same UID (type LoadBalancer -> ClusterIP -> LoadBalancer)
	// must not be answered with the deleted load balancer by its idempotency key.
	f.ensure(t, cluster, svc, f.nodes)
	if lbs, _ := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{}); len(lbs) != 1 {
		t.Errorf("after re-create the cloud has %d load balancers, want 1", len(lbs))
	}
}

// TestLoadBalancerCloudErrors: a failing update or delete is a transient
// error naming the load balancer, and changes nothing in the cloud.
func TestLoadBalancerCloudErrors(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)
	f.ensure(t, cluster, svc, f.nodes)
	before, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(before) != 1 {
		t.Fatalf("load balancers %+v, %v", before, err)
	}
	fail := func(op string) {
		t.Helper()
		if _, err := f.mc.Client.SetFaults(ctx, api.Faults{ErrorRate: 1, Operations: []string{op}}); err != nil {
			t.Fatal(err)
		}
	}

	fail("PUT /v1/load-balancers/{id}")
	svc.Spec.Ports[0].Port = 9090
	if _, err := f.lb.EnsureLoadBalancer(ctx, cluster, svc, f.nodes); !stratus.IsTransient(err) || !strings.Contains(err.Error(), before[0].ID) {
		t.Errorf("EnsureLoadBalancer while updates fail: %v; want a transient error naming %s", err, before[0].ID)
	}
	if err := f.lb.UpdateLoadBalancer(ctx, cluster, svc, f.nodes[:1]); !stratus.IsTransient(err) {
		t.Errorf("UpdateLoadBalancer while updates fail: %v; want a transient error", err)
	}
	fail("DELETE /v1/load-balancers/{id}")
	if err := f.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc); !stratus.IsTransient(err) {
		t.Errorf("EnsureLoadBalancerDeleted while deletes fail: %v; want a transient error", err)
	}
	after, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(after) != 1 || !after[0].UpdatedAt.Equal(before[0].UpdatedAt) {
		t.Errorf("after failed calls the cloud has %+v, %v; want the load balancer unchanged", after, err)
	}

	if _, err := f.mc.Client.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	if st := f.ensure(t, cluster, svc, f.nodes); st.Ingress[0].Ports[0].Port != 9090 {
		t.Errorf("after recovery: status %+v, want port 9090", st)
	}
}

func TestLoadBalancerLocalTrafficAndSourceRanges(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	svc := f.service(8080)
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = f.healthPort
	svc.Spec.LoadBalancerSourceRanges = []string{"127.0.0.2/32"}
	f.backends[1].SetHealthy(false) // kube-proxy on node-b has no local endpoint
	st := f.ensure(t, cluster, svc, f.nodes)
	lb, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lb) != 1 {
		t.Fatal(lb, err)
	}
	if hc := lb[0].HealthCheck; hc == nil || hc.Protocol != api.ProtocolHTTP || hc.Port != int(f.healthPort) || hc.Path != "/healthz" {
		t.Errorf("health check %+v, want HTTP %d /healthz", hc, f.healthPort)
	}
	if !cmp.Equal(lb[0].SourceRanges, []string{"127.0.0.2/32"}) {
		t.Errorf("source ranges %v", lb[0].SourceRanges)
	}
	addr := net.JoinHostPort(st.Ingress[0].IP, "8080")
	// From an allowed source only the healthy node answers.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		for range 4 {
			name, c, err := minicloudtest.DialTCP(addr, "127.0.0.2")
			if err != nil || name != "node-a" {
				return false, nil
			}
			c.Close()
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("traffic from 127.0.0.2 does not reach only the healthy node-a")
	}
	// From outside the ranges nothing answers.
	if name, c, err := minicloudtest.DialTCP(addr, "127.0.0.3"); err == nil {
		c.Close()
		t.Errorf("connection from 127.0.0.3, outside the source ranges, reached %s", name)
	}
	// The legacy annotation works when the field is empty.
	svc.Spec.LoadBalancerSourceRanges = nil
	svc.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "127.0.0.3/32, 127.0.0.2/32"}
	f.ensure(t, cluster, svc, f.nodes)
	if lb, _ := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{}); !cmp.Equal(lb[0].SourceRanges, []string{"127.0.0.2/32", "127.0.0.3/32"}) {
		t.Errorf("source ranges from the annotation: %v", lb[0].SourceRanges)
	}
}

func TestLoadBalancerUnsupported(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	for _, tc := range []struct {
		name   string
		modify func(*v1.Service)
		field  string
	}{
		{"SCTP", func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }, "spec.ports[0].protocol"},
		{"no node ports", func(s *v1.Service) {
			s.Spec.AllocateLoadBalancerNodePorts = new(bool)
			s.Spec.Ports[0].NodePort = 0
		}, "spec.ports[0].nodePort"},
		{"loadBalancerIP", func(s *v1.Service) { s.Spec.LoadBalancerIP = "127.100.0.9" }, "spec.loadBalancerIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := f.service(80)
			tc.modify(svc)
			_, err := f.lb.EnsureLoadBalancer(ctx, cluster, svc, f.nodes)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "default/web") {
				t.Errorf("error = %v, want ErrUnsupported naming %s and the Service", err, tc.field)
			}
		})
	}
	svc := f.service(80)
	svc.Spec.LoadBalancerSourceRanges = []string{"not-a-cidr"}
	if _, err := f.lb.EnsureLoadBalancer(ctx, cluster, svc, f.nodes); err == nil || !strings.Contains(err.Error(), "LoadBalancerSourceRanges") {
		t.Errorf("bad source range: error = %v", err)
	}
	if lbs, _ := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{}); len(lbs) != 0 {
		t.Errorf("rejected Services created %d load balancers", len(lbs))
	}
}

func TestListLoadBalancers(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	mine := f.service(80)
	theirs := f.service(81)
	theirs.UID, theirs.Name = "11111111-2222-3333-4444-555555555555", "theirs"
	f.ensure(t, cluster, mine, f.nodes)
	f.ensure(t, "other-cluster", theirs, f.nodes)
	// Not ours at all: created by hand, without tags.
	if _, err := f.mc.Client.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "manual", Listeners: []api.Listener{{Protocol: "TCP", Port: 82, TargetPort: 1}}}); err != nil {
		t.Fatal(err)
	}
	refs, err := f.lb.(stratus.LoadBalancerLister).ListLoadBalancers(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 {
		t.Fatalf("ListLoadBalancers = %+v, want only this cluster's one", refs)
	}
	r := refs[0]
	if r.Name != LoadBalancerName(mine) || r.ServiceNamespace != "default" || r.ServiceName != "web" || r.ServiceUID != mine.UID || r.Status == nil || len(r.Status.Ingress) != 1 || r.Provisioning {
		t.Errorf("ref %+v", r)
	}
	// The other cluster's load balancer is not this cluster's to delete or report.
	if _, exists, err := f.lb.GetLoadBalancer(ctx, cluster, theirs); exists || err == nil {
		t.Errorf("GetLoadBalancer of another cluster's load balancer = exists %v, %v; want an error", exists, err)
	}
	// Orphan deletion rebuilds the Service from the reference.
	rebuilt := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.ServiceNamespace, Name: r.ServiceName, UID: r.ServiceUID}}
	if err := f.lb.EnsureLoadBalancerDeleted(ctx, cluster, rebuilt); err != nil {
		t.Fatal(err)
	}
	if refs, err := f.lb.(stratus.LoadBalancerLister).ListLoadBalancers(ctx, cluster); err != nil || len(refs) != 0 {
		t.Errorf("after deleting the orphan: %+v, %v", refs, err)
	}
}

func TestRoutes(t *testing.T) {
	ctx := context.Background()
	mc, c := startCloud(t, minicloudtest.Options{})
	rt, _ := c.Routes()
	a := createInstance(t, mc, "node-a", false)
	b := createInstance(t, mc, "node-b", false)
	for _, r := range []*cloudprovider.Route{
		{TargetNode: "node-a", DestinationCIDR: "10.244.0.0/24"},
		{TargetNode: "node-b", DestinationCIDR: "10.244.1.0/24"},
		{TargetNode: "node-a", DestinationCIDR: "10.244.0.0/24"}, // a retry: fine
	} {
		if err := rt.CreateRoute(ctx, cluster, "uid", r); err != nil {
			t.Fatalf("CreateRoute %+v: %v", r, err)
		}
	}
	if err := rt.CreateRoute(ctx, cluster, "uid", &cloudprovider.Route{TargetNode: "node-b", DestinationCIDR: "10.244.0.0/24"}); err == nil {
		t.Error("routing a CIDR to a second node succeeded")
	}
	if err := rt.CreateRoute(ctx, cluster, "uid", &cloudprovider.Route{TargetNode: "ghost", DestinationCIDR: "10.244.9.0/24"}); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("route to a node without instance: %v, want InstanceNotFound", err)
	}
	// Another cluster's route is not listed.
	if _, err := mc.Client.CreateRoute(ctx, api.RouteCreate{DestinationCIDR: "10.99.0.0/24", TargetInstanceID: a.ID, Tags: map[string]string{TagCluster: "other"}}); err != nil {
		t.Fatal(err)
	}
	// A route of this cluster without a node tag (made by hand) is attributed
	// to its instance's name.
	if _, err := mc.Client.CreateRoute(ctx, api.RouteCreate{DestinationCIDR: "10.244.5.0/24", TargetInstanceID: b.ID, Tags: map[string]string{TagCluster: cluster}}); err != nil {
		t.Fatal(err)
	}
	list := func() map[string]cloudprovider.Route {
		t.Helper()
		rs, err := rt.ListRoutes(ctx, cluster)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]cloudprovider.Route{}
		for _, r := range rs {
			if r.Name == "" {
				t.Errorf("route %+v has no name", r)
			}
			out[r.DestinationCIDR] = cloudprovider.Route{TargetNode: r.TargetNode, DestinationCIDR: r.DestinationCIDR, Blackhole: r.Blackhole}
		}
		return out
	}
	want := map[string]cloudprovider.Route{
		"10.244.0.0/24": {TargetNode: "node-a", DestinationCIDR: "10.244.0.0/24"},
		"10.244.1.0/24": {TargetNode: "node-b", DestinationCIDR: "10.244.1.0/24"},
		"10.244.5.0/24": {TargetNode: "node-b", DestinationCIDR: "10.244.5.0/24"},
	}
	if diff := cmp.Diff(want, list()); diff != "" {
		t.Errorf("ListRoutes (-want +got):\n%s", diff)
	}
	// node-a's instance goes away: its route is a blackhole, still named for the node.
	if err := mc.Client.DeleteInstance(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	want["10.244.0.0/24"] = cloudprovider.Route{TargetNode: "node-a", DestinationCIDR: "10.244.0.0/24", Blackhole: true}
	if diff := cmp.Diff(want, list()); diff != "" {
		t.Errorf("ListRoutes after the instance is deleted (-want +got):\n%s", diff)
	}
	rs, _ := rt.ListRoutes(ctx, cluster)
	for _, r := range rs {
		for range 2 { // the second delete finds it gone
			if err := rt.DeleteRoute(ctx, cluster, r); err != nil {
				t.Fatalf("DeleteRoute %+v: %v", r, err)
			}
		}
	}
	if got := list(); len(got) != 0 {
		t.Errorf("routes left: %v", got)
	}
}

func TestErrorMapping(t *testing.T) {
	ctx := context.Background()
	mc, c := startCloud(t, minicloudtest.Options{})
	v2, _ := c.InstancesV2()
	in := createInstance(t, mc, "n", false)
	n := node("n", ProviderID(in.ID))
	op := []string{"GET /v1/instances/{id}"}

	if _, err := mc.Client.SetFaults(ctx, api.Faults{ThrottleRate: 1, Operations: op}); err != nil {
		t.Fatal(err)
	}
	_, err := v2.InstanceMetadata(ctx, n)
	var th *stratus.ThrottledError
	// The whole message: the request names the instance; the Node is the
	// caller's to name (stratus's cloud layer does).
	want := "minicloud GET /v1/instances/" + in.ID + ": 429 throttled: request rate limit exceeded (retry after 1s)"
	if !errors.As(err, &th) || th.RetryAfter != time.Second || err.Error() != want {
		t.Errorf("429: error = %v, want a ThrottledError with RetryAfter 1s: %s", err, want)
	}
	if _, err := mc.Client.SetFaults(ctx, api.Faults{ErrorRate: 1, Operations: op}); err != nil {
		t.Fatal(err)
	}
	if ok, err := v2.InstanceExists(ctx, n); ok || !stratus.IsTransient(err) {
		t.Errorf("500: InstanceExists = %v, %v; want a TransientError", ok, err)
	}
	if _, err := mc.Client.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.InstanceMetadata(ctx, n); err != nil {
		t.Errorf("after clearing faults: %v", err)
	}
	for _, tc := range []struct {
		node *v1.Node
		want string
	}{
		{node("n", ProviderID("i-999999999999")), "instance i-999999999999: instance not found"},
		{node("ghost", ""), "no instance named ghost: instance not found"},
		{node("n", "aws:///i-1"), `provider ID "aws:///i-1" is not of the form minicloud://<instance-id>`},
	} {
		if _, err := v2.InstanceMetadata(ctx, tc.node); err == nil || err.Error() != tc.want {
			t.Errorf("InstanceMetadata(%s, %q) = %v, want %s", tc.node.Name, tc.node.Spec.ProviderID, err, tc.want)
		}
	}
	// A wrong token (401) is neither throttling nor transient: retrying will not help.
	bad, err := New(&Config{URL: mc.URL, Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	badV2, _ := bad.InstancesV2()
	if _, err := badV2.InstanceMetadata(ctx, n); err == nil || stratus.IsTransient(err) || errors.As(err, &th) {
		t.Errorf("401: error = %v, want a plain error", err)
	}
	// Nobody listening: transient.
	if err := mc.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.InstanceMetadata(ctx, n); !stratus.IsTransient(err) {
		t.Errorf("server down: error = %v, want a TransientError", err)
	}
}

func TestRegistration(t *testing.T) {
	if !cloudprovider.IsCloudProvider(ProviderName) {
		t.Fatal("minicloud is not registered")
	}
	if _, err := cloudprovider.GetCloudProvider(ProviderName, nil); !errors.Is(err, ErrNoConfig) {
		t.Errorf("no config: %v, want ErrNoConfig", err)
	}
	_, err := cloudprovider.GetCloudProvider(ProviderName, strings.NewReader("url: http://127.0.0.1:1\ntoken: s3cret\nzone: a\n"))
	if err == nil || !strings.Contains(err.Error(), "zone") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("unknown key: %v", err)
	}
	c, err := New(&Config{URL: "http://127.0.0.1:1", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{
		"Instances": second(c.Instances()), "Zones": second(c.Zones()), "Clusters": second(c.Clusters()),
		"InstancesV2": second(c.InstancesV2()), "LoadBalancer": second(c.LoadBalancer()), "Routes": second(c.Routes()),
	} {
		if want := name == "InstancesV2" || name == "LoadBalancer" || name == "Routes"; ok != want {
			t.Errorf("%s supported = %v, want %v", name, ok, want)
		}
	}
	if c.ProviderName() != "minicloud" || !c.HasClusterID() {
		t.Error("ProviderName/HasClusterID")
	}
}

func second[T any](_ T, ok bool) bool { return ok }

// A backend whose instance is gone (its Node still kept by the deletion guard)
// does not fail the load balancer: create and update leave it out, and the
// other backends get the traffic.
func TestLoadBalancerLeavesOutGoneTargets(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	gone := createInstance(t, f.mc, "node-gone", false)
	if err := f.mc.Client.DeleteInstance(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	nodes := append(slices.Clone(f.nodes), node("node-gone", ProviderID(gone.ID)))

	// Create.
	svc := f.service(8080)
	st := f.ensure(t, cluster, svc, nodes)
	lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("cloud has load balancers %+v (%v), want exactly one", lbs, err)
	}
	if got := targetIDs(lbs[0].Targets); !slices.Equal(got, instanceIDs(f.nodes)) {
		t.Errorf("targets after create = %v, want %v (without the gone %s)", got, instanceIDs(f.nodes), gone.ID)
	}
	waitBackends(t, net.JoinHostPort(st.Ingress[0].IP, "8080"), "node-a", "node-b")

	// Update: node-b's instance goes too; node-a keeps the traffic.
	if err := f.mc.Client.DeleteInstance(ctx, instanceIDs(f.nodes[1:])[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.lb.UpdateLoadBalancer(ctx, cluster, svc, nodes); err != nil {
		t.Fatalf("UpdateLoadBalancer with gone backends: %v", err)
	}
	lbs, err = f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("cloud has load balancers %+v (%v), want exactly one", lbs, err)
	}
	if got, want := targetIDs(lbs[0].Targets), instanceIDs(f.nodes[:1]); !slices.Equal(got, want) {
		t.Errorf("targets after update = %v, want %v", got, want)
	}
	waitBackends(t, net.JoinHostPort(st.Ingress[0].IP, "8080"), "node-a")
}

func targetIDs(targets []api.Target) []string {
	var ids []string
	for _, t := range targets {
		ids = append(ids, t.InstanceID)
	}
	slices.Sort(ids)
	return ids
}

func instanceIDs(nodes []*v1.Node) []string {
	var ids []string
	for _, n := range nodes {
		id, _ := InstanceIDOf(n.Spec.ProviderID)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// With foreignNodes: internalIP, nodes of other providers (a hybrid cluster)
// are targets by their InternalIP and get the traffic; by default they are
// left out.
func TestLoadBalancerForeignNodes(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond})
	// An address on loopback that is no minicloud instance's: a machine of
	// another cloud that minicloud can reach.
	const foreignIP = "127.77.0.9"
	be := minicloudtest.StartBackend(t, "vsphere-node", foreignIP, minicloudtest.BackendOptions{TCP: true})
	foreign := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-node"},
		Spec: v1.NodeSpec{ProviderID: "vsphere://4213abcd-0000-0000-0000-000000000001"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeHostName, Address: "vsphere-node"}, {Type: v1.NodeInternalIP, Address: foreignIP}}}}
	noIP := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-ip"}, Spec: v1.NodeSpec{ProviderID: "vsphere://4213abcd-0000-0000-0000-000000000002"}}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hybrid", UID: types.UID("6f0c3d2e-1b2a-4c9b-8d7e-2f1a3b4c5d6f")},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 8080, NodePort: int32(be.Port)}}},
	}
	for _, tc := range []struct {
		config string
		want   []api.Target
	}{
		{"", nil},
		{"foreignNodes: skip\n", nil},
		{"foreignNodes: internalIP\n", []api.Target{{IP: foreignIP}}},
	} {
		conf := fmt.Sprintf("url: %s\ntoken: %s\n%s", mc.URL, mc.Token, tc.config)
		raw, err := cloudprovider.GetCloudProvider(ProviderName, strings.NewReader(conf))
		if err != nil {
			t.Fatal(err)
		}
		lbs, _ := raw.LoadBalancer()
		f := &lbFixture{mc: mc, lb: lbs}
		st := f.ensure(t, cluster, svc, []*v1.Node{foreign, noIP})
		list, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
		if err != nil || len(list) != 1 {
			t.Fatalf("%q: load balancers %+v, %v", tc.config, list, err)
		}
		if !cmp.Equal(list[0].Targets, tc.want, cmpopts.EquateEmpty()) {
			t.Errorf("%q: targets %+v, want %+v", tc.config, list[0].Targets, tc.want)
		}
		if len(tc.want) > 0 {
			waitBackends(t, net.JoinHostPort(st.Ingress[0].IP, "8080"), "vsphere-node")
		}
		if err := lbs.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ParseConfig(strings.NewReader(fmt.Sprintf("url: %s\ntoken: x\nforeignNodes: all\n", mc.URL))); err == nil || !strings.Contains(err.Error(), "foreignNodes") {
		t.Errorf("foreignNodes: all: err = %v, want an error naming foreignNodes", err)
	}
}

// TestOwnTagsWithinCloudLimits creates a load balancer and a route with the
// longest names Kubernetes allows: the provider's tags fit minicloud's
// limits. A cluster name too long for a tag value is refused, naming the
// flag, before anything is created.
func TestOwnTagsWithinCloudLimits(t *testing.T) {
	ctx := context.Background()
	f := newLBFixture(t)
	rt, _ := f.cloud.Routes()
	longest := strings.Repeat("c", api.MaxTagValueLen)
	svc := f.service(80)
	svc.Namespace, svc.Name = strings.Repeat("n", 63), strings.Repeat("s", 63)
	f.ensure(t, longest, svc, f.nodes)
	nodeName := strings.Repeat("w", 253)
	createInstance(t, f.mc, nodeName, false)
	if err := rt.CreateRoute(ctx, longest, "uid", &cloudprovider.Route{TargetNode: types.NodeName(nodeName), DestinationCIDR: "10.244.0.0/24"}); err != nil {
		t.Fatalf("CreateRoute to a node with a 253-byte name: %v", err)
	}
	lbs, err := f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	routes, err := f.mc.Client.ListRoutes(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) != 1 || len(routes) != 1 {
		t.Fatalf("%d load balancers and %d routes, want 1 of each", len(lbs), len(routes))
	}

	tooLong := longest + "c"
	other := f.service(81)
	other.UID = "1b6e1f3a-5c1e-4c9b-9d7e-2f1a3b4c5d6e"
	if _, err := f.lb.EnsureLoadBalancer(ctx, tooLong, other, f.nodes); err == nil || !strings.Contains(err.Error(), "--cluster-name") {
		t.Errorf("EnsureLoadBalancer with a %d-byte cluster name: %v, want an error naming --cluster-name", len(tooLong), err)
	}
	if err := rt.CreateRoute(ctx, tooLong, "uid", &cloudprovider.Route{TargetNode: types.NodeName(nodeName), DestinationCIDR: "10.244.1.0/24"}); err == nil || !strings.Contains(err.Error(), "--cluster-name") {
		t.Errorf("CreateRoute with a %d-byte cluster name: %v, want an error naming --cluster-name", len(tooLong), err)
	}
	lbs, _ = f.mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
	routes, _ = f.mc.Client.ListRoutes(ctx, client.ListOptions{})
	if len(lbs) != 1 || len(routes) != 1 {
		t.Errorf("after the refusals: %d load balancers and %d routes, want 1 of each", len(lbs), len(routes))
	}
}

// With clusterHealthCheck: kubeProxy, a Cluster-policy load balancer probes
// kube-proxy's /healthz on every node; a Local one keeps the Service's
// healthCheckNodePort; by default the NodePort is probed.
func TestLoadBalancerKubeProxyHealthCheck(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond})
	for _, tc := range []struct {
		name, config string
		local        bool
		want         api.HealthCheck
	}{
		{"default", "", false, api.HealthCheck{Protocol: api.ProtocolTCP, Port: 30080}},
		{"kube-proxy", "clusterHealthCheck: kubeProxy\n", false, api.HealthCheck{Protocol: api.ProtocolHTTP, Port: 10256, Path: "/healthz"}},
		{"kube-proxy, Local", "clusterHealthCheck: kubeProxy\n", true, api.HealthCheck{Protocol: api.ProtocolHTTP, Port: 31000, Path: "/healthz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := fmt.Sprintf("url: %s\ntoken: %s\n%s", mc.URL, mc.Token, tc.config)
			raw, err := cloudprovider.GetCloudProvider(ProviderName, strings.NewReader(conf))
			if err != nil {
				t.Fatal(err)
			}
			lbs, _ := raw.LoadBalancer()
			svc := &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hc-" + strings.ReplaceAll(strings.ToLower(tc.name), ", ", "-"), UID: types.UID("uid-" + strings.NewReplacer(" ", "", ",", "").Replace(tc.name))},
				Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
					Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
			}
			if tc.local {
				svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				svc.Spec.HealthCheckNodePort = 31000
			}
			f := &lbFixture{mc: mc, lb: lbs}
			f.ensure(t, cluster, svc, nil)
			list, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			name := LoadBalancerName(svc)
			for _, lb := range list {
				if lb.Name != name {
					continue
				}
				if lb.HealthCheck == nil || lb.HealthCheck.Protocol != tc.want.Protocol || lb.HealthCheck.Port != tc.want.Port || lb.HealthCheck.Path != tc.want.Path {
					t.Errorf("health check %+v, want %+v", lb.HealthCheck, tc.want)
				}
				return
			}
			t.Fatalf("no load balancer %s in %+v", name, list)
		})
	}
}
