package openstack_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"

	"github.com/stratus-ccm/stratus/providers/openstack"
)

const pending = time.Hour

// lbEnv is a cloud with nodes running a backend on one NodePort, and the
// IDs of the VIP subnet and the public network read through Neutron.
type lbEnv struct {
	*env
	nodes    []*v1.Node
	backends []*minicloudtest.Backend
	// port is the backends' TCP and UDP port, healthPort their /healthz.
	port, healthPort int
	vipSub           string
	pubNet           string
}

func startLB(t *testing.T) *lbEnv {
	t.Helper()
	e := start(t, mos.Options{PendingDelay: pending, MaxPageSize: 1})
	le := &lbEnv{env: e, healthPort: testsupport.FreePort(t)}
	for _, n := range []string{"n1", "n2", "n3"} {
		in := e.create(t, n, "mc.small", minicloud.Zones[0], false)
		be := minicloudtest.StartBackend(t, n, in.PrivateIP, minicloudtest.BackendOptions{TCP: true, UDP: true, Port: le.port, HealthPort: le.healthPort})
		le.port = be.Port
		le.backends = append(le.backends, be)
		le.nodes = append(le.nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: in.PrivateIP}}}})
	}
	ctx := context.Background()
	nc := e.neutron(t)
	pages, err := subnets.List(nc, subnets.ListOpts{Name: "vips"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subs, _ := subnets.ExtractSubnets(pages)
	pages, err = networks.List(nc, networks.ListOpts{Name: "public"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nets, _ := networks.ExtractNetworks(pages)
	if len(subs) != 1 || len(nets) != 1 {
		t.Fatalf("vips subnet %+v, public network %+v", subs, nets)
	}
	le.vipSub, le.pubNet = subs[0].ID, nets[0].ID
	return le
}

// neutron is a Neutron client of the test's own, to read what the
// provider did.
func (e *env) neutron(t *testing.T) *gophercloud.ServiceClient {
	t.Helper()
	pc, err := gos.AuthenticatedClient(context.Background(), gophercloud.AuthOptions{IdentityEndpoint: e.mc.IdentityURL, Username: "t", Password: e.mc.Token,
		DomainName: mos.DomainName, TenantName: mos.ProjectName, AllowReauth: true})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := gos.NewNetworkV2(pc, gophercloud.EndpointOpts{Region: minicloud.Region})
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

func (le *lbEnv) provider(t *testing.T, lbConf string) (cloudprovider.LoadBalancer, *openstack.Cloud) {
	t.Helper()
	p := newProvider(t, cloudConf(le.mc, "[LoadBalancer]\nsubnet-id = "+le.vipSub+"\n"+lbConf))
	lb, ok := p.LoadBalancer()
	if !ok {
		t.Fatal("no load balancers")
	}
	return lb, p
}

func service(port int, nodePort int) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: int32(port), NodePort: int32(nodePort)}}}}
}

// ensure calls EnsureLoadBalancer until it stops returning a RetryError,
// ending each pending delay of the dialect, and returns the status and how
// many RetryErrors came first.
func (le *lbEnv) ensure(t *testing.T, lb cloudprovider.LoadBalancer, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, int) {
	t.Helper()
	var (
		st      *v1.LoadBalancerStatus
		retries int
	)
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		st, err = lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
		var re *cloudproviderapi.RetryError
		if errors.As(err, &re) {
			retries++
			le.clk.advance(pending)
			return false, nil
		}
		return true, err
	})
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	return st, retries
}

// TestLoadBalancerVIP: a fully populated load balancer, non-blocking,
// then traffic through the VIP to every node; member updates; the
// listing; cascade delete.
func TestLoadBalancerVIP(t *testing.T) {
	le := startLB(t)
	lb, p := le.provider(t, "create-monitor = true\n")
	ctx := context.Background()
	svc := service(18300, le.port)
	if _, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc, le.nodes); !isRetry(err) {
		t.Fatalf("first Ensure: %v, want a RetryError while provisioning", err)
	}
	refs, err := p.ListLoadBalancers(ctx, "kubernetes")
	if err != nil || len(refs) != 1 || !refs[0].Provisioning || refs[0].ServiceName != "web" || refs[0].ServiceNamespace != "default" || refs[0].ServiceUID != "uid-1" {
		t.Fatalf("listing while provisioning: %+v, %v", refs, err)
	}
	st, _ := le.ensure(t, lb, svc, le.nodes)
	if len(st.Ingress) != 1 || st.Ingress[0].IP == "" {
		t.Fatalf("status %+v", st)
	}
	addr := net.JoinHostPort(st.Ingress[0].IP, "18300")
	if c := minicloudtest.CountTCP(t, addr, 6); c["n1"] == 0 || c["n2"] == 0 || c["n3"] == 0 {
		t.Errorf("traffic through the VIP: %v", c)
	}
	refs, err = p.ListLoadBalancers(ctx, "kubernetes")
	if err != nil || len(refs) != 1 || refs[0].Provisioning || refs[0].Status == nil || refs[0].Status.Ingress[0].IP != st.Ingress[0].IP {
		t.Errorf("listing once active: %+v, %v", refs, err)
	}
	if refs, _ := p.ListLoadBalancers(ctx, "other"); len(refs) != 0 {
		t.Errorf("another cluster's listing: %+v", refs)
	}

	// n3 leaves; a gone node's address stays harmless.
	if err := lb.UpdateLoadBalancer(ctx, "kubernetes", svc, le.nodes[:2]); !isRetry(err) {
		t.Fatalf("UpdateLoadBalancer: %v, want a RetryError while Octavia updates", err)
	}
	if err := lb.UpdateLoadBalancer(ctx, "kubernetes", svc, le.nodes[:2]); !isRetry(err) {
		t.Errorf("UpdateLoadBalancer while pending: %v, want a RetryError", err)
	}
	st2, _ := le.ensure(t, lb, svc, le.nodes[:2])
	if st2.Ingress[0].IP != st.Ingress[0].IP {
		t.Errorf("VIP changed: %v -> %v", st, st2)
	}
	if c := minicloudtest.CountTCP(t, addr, 6); c["n3"] != 0 || c["n1"] == 0 || c["n2"] == 0 {
		t.Errorf("traffic after removing n3: %v", c)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	le.clk.advance(pending)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc)
		return !exists, err
	})
	if err != nil {
		t.Fatalf("load balancer not gone after delete: %v", err)
	}
	if !minicloudtest.Refused(addr) {
		t.Error("the VIP still accepts connections after the delete")
	}
}

// TestLoadBalancerFloatingIP: with floating-network-id the status is a
// floating IP that carries traffic, deleted with the load balancer.
func TestLoadBalancerFloatingIP(t *testing.T) {
	le := startLB(t)
	lb, _ := le.provider(t, "floating-network-id = "+le.pubNet+"\n")
	ctx := context.Background()
	svc := service(18301, le.port)
	st, retries := le.ensure(t, lb, svc, le.nodes)
	if retries == 0 || len(st.Ingress) != 1 || !le.mc.Config.PublicCIDR.Contains(mustParse(t, st.Ingress[0].IP)) {
		t.Fatalf("status %+v after %d retries, want a floating IP", st, retries)
	}
	addr := net.JoinHostPort(st.Ingress[0].IP, strconv.Itoa(18301))
	if c := minicloudtest.CountTCP(t, addr, 3); c["n1"]+c["n2"]+c["n3"] != 3 {
		t.Errorf("traffic through the floating IP: %v", c)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	if !minicloudtest.Refused(addr) {
		t.Error("the floating IP still accepts connections after the delete")
	}
}

func isRetry(err error) bool {
	var re *cloudproviderapi.RetryError
	return errors.As(err, &re)
}

func mustParse(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestLoadBalancerClass: a Service's loadbalancer.openstack.org/class picks
// a [LoadBalancerClass] section, whose floating-network-id gives it a
// floating IP that [LoadBalancer] does not; a Service without the annotation
// keeps [LoadBalancer]'s VIP; a class cloud.conf lacks is an error naming the
// annotation, and creates nothing.
func TestLoadBalancerClass(t *testing.T) {
	le := startLB(t)
	lb, _ := le.provider(t, "[LoadBalancerClass \"public\"]\nfloating-network-id = "+le.pubNet+"\n")
	ctx := context.Background()

	public := service(18311, le.port)
	public.Annotations = map[string]string{openstack.ClassAnnotation: "public"}
	st, _ := le.ensure(t, lb, public, le.nodes)
	if len(st.Ingress) != 1 || !le.mc.Config.PublicCIDR.Contains(mustParse(t, st.Ingress[0].IP)) {
		t.Fatalf("class public: status %+v, want a floating IP", st)
	}
	addr := net.JoinHostPort(st.Ingress[0].IP, strconv.Itoa(18311))
	if c := minicloudtest.CountTCP(t, addr, 3); c["n1"]+c["n2"]+c["n3"] != 3 {
		t.Errorf("traffic through the class's floating IP: %v", c)
	}
	if got, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", public); err != nil || !exists || len(got.Ingress) != 1 || got.Ingress[0].IP != st.Ingress[0].IP {
		t.Errorf("GetLoadBalancer(class public) = %+v, %v, %v; want the floating IP %s", got, exists, err, st.Ingress[0].IP)
	}

	plain := service(18312, le.port)
	plain.Name, plain.UID = "plain", "uid-2"
	st2, _ := le.ensure(t, lb, plain, le.nodes)
	if len(st2.Ingress) != 1 || le.mc.Config.PublicCIDR.Contains(mustParse(t, st2.Ingress[0].IP)) {
		t.Errorf("no class: status %+v, want the VIP, not a floating IP", st2)
	}

	unknown := service(18313, le.port)
	unknown.Name, unknown.UID = "unknown", "uid-3"
	unknown.Annotations = map[string]string{openstack.ClassAnnotation: "private"}
	_, err := lb.EnsureLoadBalancer(ctx, "kubernetes", unknown, le.nodes)
	if !errors.Is(err, openstack.ErrUnsupported) || !strings.Contains(err.Error(), "annotation "+openstack.ClassAnnotation) || !strings.Contains(err.Error(), `"private"`) {
		t.Errorf("unknown class: %v; want an ErrUnsupported naming the annotation and the class", err)
	}
	if _, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", unknown); err != nil || exists {
		t.Errorf("unknown class: GetLoadBalancer = %v, %v; want nothing created", exists, err)
	}

	if err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", public); err != nil {
		t.Fatal(err)
	}
	if !minicloudtest.Refused(addr) {
		t.Error("the class's floating IP still accepts connections after the delete")
	}
}
