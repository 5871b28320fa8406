package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
	_ "github.com/stratus-ccm/stratus/providers/openstack" // registers "openstack" in the stratus child process
)

// The OpenStack scenarios run the upstream OpenStack CCM (hack/kubebins'
// openstack-ccm: k8s.io/cloud-provider-openstack, unchanged) against
// minicloud's OpenStack dialect: the oracle that the dialect answers what the
// upstream provider sends, with real traffic through what it builds.

// openstackCCMBinary is the upstream OpenStack CCM hack/kubebins builds on
// request.
func openstackCCMBinary(t *testing.T) string {
	t.Helper()
	dir, err := testenv.BinDir()
	if err != nil {
		t.Fatalf("find kubebins: %v", err)
	}
	bin := filepath.Join(dir, "openstack-ccm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("upstream OpenStack CCM not found at %s: run `make kubebins-openstack` (hack/kubebins/build.sh openstack-ccm) first", bin)
	}
	return bin
}

// dialectIDs returns the IDs a cloud.conf names: the VIP subnet, the
// external network and the router, looked up as an operator would.
func dialectIDs(t *testing.T, ctx context.Context, mc *minicloudtest.Cloud) (vipSubnet, publicNet, router string) {
	t.Helper()
	pc, err := gos.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: mc.IdentityURL, Username: "operator", Password: mc.Token,
		DomainName: openstack.DomainName, TenantName: openstack.ProjectName,
	})
	if err != nil {
		t.Fatalf("authenticate to the dialect: %v", err)
	}
	nc, err := gos.NewNetworkV2(pc, gophercloud.EndpointOpts{Region: minicloud.Region})
	if err != nil {
		t.Fatal(err)
	}
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
	pages, err = routers.List(nc, routers.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := routers.ExtractRouters(pages)
	if len(subs) != 1 || len(nets) != 1 || len(rs) != 1 {
		t.Fatalf("dialect topology: %d vip subnets, %d public networks, %d routers", len(subs), len(nets), len(rs))
	}
	return subs[0].ID, nets[0].ID, rs[0].ID
}

// startOpenStackRun starts a control plane, a minicloud serving the
// OpenStack dialect and the side's manager configured by the same
// cloud.conf: the upstream OpenStack CCM, or stratus-ccm with
// providers/openstack.
func startOpenStackRun(t *testing.T, s side) *run {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane and the upstream OpenStack CCM; skipped under -short")
	}
	bin := ""
	if s == upstream {
		bin = openstackCCMBinary(t)
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	t.Cleanup(env.Stop)
	cloud := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 200 * time.Millisecond, OpenStack: &openstack.Options{}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &run{t: t, ctx: ctx, side: s, kube: env.Clientset(t), cloud: cloud, settle: 2 * settleTimeout}

	vipSubnet, publicNet, router := dialectIDs(t, ctx, cloud)
	conf := fmt.Sprintf(`[Global]
auth-url=%s
username=ccm
password=%s
user-domain-name=Default
tenant-name=minicloud
tenant-domain-name=Default
region=%s

[LoadBalancer]
subnet-id=%s
floating-network-id=%s

[Route]
router-id=%s
`, cloud.IdentityURL, cloud.Token, minicloud.Region, vipSubnet, publicNet, router)
	cloudConfig := filepath.Join(t.TempDir(), "cloud.conf")
	if err := os.WriteFile(cloudConfig, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := managertest.WriteKubeconfig(t, env.Config)
	args := []string{
		"--cloud-provider=openstack", "--cloud-config=" + cloudConfig,
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0",
		"--cluster-name=compat", "--node-monitor-period=1s", "--route-reconciliation-period=2s",
		"--configure-cloud-routes=true", "--cluster-cidr=" + clusterCIDR,
	}
	switch s {
	case upstream:
		startUpstream(t, bin, args)
	case stratus:
		// Deliberate difference node-deletion-guard, as in startRun.
		managertest.StartProcess(t, append(args, "--node-deletion-grace-period=2s")...)
	}
	return r
}

// openstackTolerances are applied to both sides of the OpenStack scenario,
// besides tolerances.
var openstackTolerances = []tolerance{
	{ID: "openstack-lb-nonblocking", apply: func(s *snapshot) {
		// Upstream blocks until ACTIVE; stratus's provider answers a
		// RetryError (from EnsureLoadBalancer: a Normal event the tolerance
		// lb-provisioning-event compares as upstream's Warning; from
		// UpdateLoadBalancer: no event), and a node change then ends in an
		// Ensure, not in an UpdatedLoadBalancer.
		drop := []string{"Warning SyncLoadBalancerFailed (", "Warning UpdateLoadBalancerFailed (", "Normal UpdatedLoadBalancer ("}
		for obj, evs := range s.Events {
			if strings.HasPrefix(obj, "Service/") {
				s.Events[obj] = slices.DeleteFunc(evs, func(e string) bool {
					return slices.ContainsFunc(drop, func(p string) bool { return strings.HasPrefix(e, p) })
				})
			}
		}
	}},
}

// openstackDifferences are the differences the OpenStack scenario's
// assertions expect of stratus (see openStackScenario).
var openstackDifferences = []string{"openstack-lb-annotations"}

// TestOpenStackParity runs the OpenStack scenario against the upstream
// OpenStack CCM and against stratus-ccm with providers/openstack, each on a
// fresh control plane and dialect with the same cloud.conf: both pass the
// same checks (node initialization, shutdown and deletion, load balancers
// with and without a floating IP carrying traffic, routes), and their final
// states are equal up to the differences docs/differences.md lists.
func TestOpenStackParity(t *testing.T) {
	t.Parallel()
	compareSides(t, []side{upstream, stratus}, func(t *testing.T, s side) any {
		r := startOpenStackRun(t, s)
		openStackScenario(r)
		snap, names := r.takeSnapshot([]string{"Service/" + svcName + ": Normal DeletedLoadBalancer", "Service/internal: Normal DeletedLoadBalancer"})
		for _, tol := range append(tolerances, openstackTolerances...) {
			tol.apply(&snap)
		}
		got := normalize(snap, names)
		if testing.Verbose() {
			js, _ := json.MarshalIndent(got, "", "  ")
			t.Logf("final state (normalized):\n%s", js)
		}
		return got
	}, func(got []any) {
		if d := cmp.Diff(got[0], got[1]); d != "" {
			t.Errorf("stratus with providers/openstack differs from the upstream OpenStack CCM in ways docs/differences.md does not list (-upstream +stratus):\n%s", d)
		}
	})
}

// TestOpenStackDifferencesDocumented: the OpenStack scenario tolerates and
// expects only differences docs/differences.md lists.
func TestOpenStackDifferencesDocumented(t *testing.T) {
	ids := documentedDifferences(t)
	for _, tol := range openstackTolerances {
		if !ids[tol.ID] {
			t.Errorf("tolerance %q is not a difference listed in docs/differences.md", tol.ID)
		}
	}
	for _, id := range openstackDifferences {
		if !ids[id] {
			t.Errorf("difference %q is not listed in docs/differences.md", id)
		}
	}
}

// openStackScenario: node initialization, routes, load balancers with and
// without a floating IP carrying traffic, shutdown, deletion, Service
// deletion. The "internal" Service asks for a VIP with upstream's
// annotation, which providers/openstack does not read
// (openstack-lb-annotations): with stratus it gets a floating IP too.
func openStackScenario(r *run) {
	t := r.t
	const internalNodePort = 30081
	insts := map[string]*api.Instance{}
	podCIDRs := map[string]string{}
	for i, name := range []string{"os-1", "os-2"} {
		insts[name] = r.instance(name, false)
		minicloudtest.StartBackend(t, name, insts[name].PrivateIP, minicloudtest.BackendOptions{TCP: true, Port: nodePort})
		minicloudtest.StartBackend(t, name, insts[name].PrivateIP, minicloudtest.BackendOptions{TCP: true, Port: internalNodePort})
		r.join(insts[name], nodeOptions{})
		podCIDRs[name] = "10.244." + strconv.Itoa(i+1) + ".0/24"
	}

	// Node initialization: provider ID, addresses from the instance's port,
	// zone and instance type.
	for name, inst := range insts {
		r.waitNode(name, "initialized", initialized)
		n := r.node(name)
		if n.Spec.ProviderID != "openstack:///"+inst.ID {
			t.Errorf("node %s: provider ID %q", name, n.Spec.ProviderID)
		}
		if n.Labels[corev1.LabelTopologyZone] != inst.Zone || n.Labels[corev1.LabelInstanceTypeStable] != inst.Type || n.Labels[corev1.LabelTopologyRegion] != minicloud.Region {
			t.Errorf("node %s: labels %v", name, n.Labels)
		}
		found := false
		for _, a := range n.Status.Addresses {
			found = found || (a.Type == corev1.NodeInternalIP && a.Address == inst.PrivateIP)
		}
		if !found {
			t.Errorf("node %s: addresses %v lack InternalIP %s", name, n.Status.Addresses, inst.PrivateIP)
		}
	}

	// Routes: one per node's pod CIDR, to the node's instance. The pod
	// CIDRs are allocated once the Nodes are initialized: a route to a Node
	// without an InternalIP fails on both sides (a Warning
	// FailedToCreateRoute), so with pod CIDRs from the start whether a
	// side records one would depend on which of its controllers runs first.
	for name, cidr := range podCIDRs {
		r.setPodCIDR(name, cidr)
	}
	r.waitCloud("a route per node", func(_ []api.LoadBalancer, routes []api.Route) bool {
		if len(routes) != 2 {
			return false
		}
		for _, rt := range routes {
			if want := map[string]string{"10.244.1.0/24": insts["os-1"].ID, "10.244.2.0/24": insts["os-2"].ID}[rt.DestinationCIDR]; want != rt.TargetInstanceID {
				return false
			}
		}
		return true
	})

	// A LoadBalancer Service with a floating IP, and an internal one without.
	r.createService(lbService())
	r.createService(lbService(func(s *corev1.Service) {
		s.Name = "internal"
		s.Annotations = map[string]string{"service.beta.kubernetes.io/openstack-internal-load-balancer": "true"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 81, TargetPort: intstr.FromInt32(8081), NodePort: internalNodePort}}
	}))
	ingress := func(name string) string {
		var ip string
		r.waitService(name, "ingress", func(s *corev1.Service) bool {
			if hasIngress(s) {
				ip = s.Status.LoadBalancer.Ingress[0].IP
			}
			return ip != ""
		})
		return ip
	}
	public, internal := ingress(svcName), ingress("internal")
	if !r.cloud.Config.PublicCIDR.Contains(mustParseAddr(t, public)) {
		t.Errorf("public service ingress %s is not a floating IP of %s", public, r.cloud.Config.PublicCIDR)
	}
	internalPool := r.cloud.Config.VIPCIDR
	if r.side == stratus {
		internalPool = r.cloud.Config.PublicCIDR // openstack-lb-annotations
	}
	if !internalPool.Contains(mustParseAddr(t, internal)) {
		t.Errorf("internal service ingress %s is not in %s", internal, internalPool)
	}
	for addr, want := range map[string]int{net.JoinHostPort(public, "80"): 2, net.JoinHostPort(internal, "81"): 2} {
		got := minicloudtest.CountTCP(t, addr, 4)
		if got["os-1"] != want || got["os-2"] != want {
			t.Errorf("traffic through %s: %v", addr, got)
		}
	}

	// Shutdown: a stopped instance whose Node is not ready gets the shutdown
	// taint.
	ctx := r.ctx
	if _, err := r.cloud.Client.StopInstance(ctx, insts["os-2"].ID); err != nil {
		t.Fatal(err)
	}
	if err := r.setReady("os-2", false); err != nil {
		t.Fatal(err)
	}
	r.waitNode("os-2", "shutdown taint", hasTaint(cloudproviderapi.TaintNodeShutdown))

	// Deletion: a gone instance's Node is deleted, and it leaves the pools.
	if err := r.cloud.Client.DeleteInstance(ctx, insts["os-2"].ID); err != nil {
		t.Fatal(err)
	}
	r.waitFor("node os-2 deleted", func(ctx context.Context) (bool, error) {
		_, err := r.kube.CoreV1().Nodes().Get(ctx, "os-2", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	r.waitCloud("load balancers with one target", func(lbs []api.LoadBalancer, _ []api.Route) bool {
		for _, lb := range lbs {
			if lb.State != api.LBActive || len(lb.Targets) != 1 || lb.Targets[0].InstanceID != insts["os-1"].ID {
				return false
			}
		}
		return len(lbs) == 2
	})
	if got := minicloudtest.CountTCP(t, net.JoinHostPort(public, "80"), 2); got["os-1"] != 2 {
		t.Errorf("traffic through the floating IP after the deletion: %v", got)
	}
	// and its pod CIDR's route goes (a blackhole until the route controller's
	// next pass removes it; the snapshot must not race that pass).
	r.waitCloud("only the remaining node's route", func(_ []api.LoadBalancer, routes []api.Route) bool {
		return len(routes) == 1 && routes[0].DestinationCIDR == "10.244.1.0/24"
	})

	// Deleting the Services deletes the load balancers and the floating IP.
	for _, name := range []string{svcName, "internal"} {
		if err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r.noLoadBalancers()
	r.waitFor("floating IP released", func(context.Context) (bool, error) {
		return minicloudtest.Refused(net.JoinHostPort(public, "80")), nil
	})
	// The finalizer goes after the load balancer: the snapshot must not
	// race its removal.
	for _, name := range []string{svcName, "internal"} {
		r.waitFor("service "+name+" gone", func(ctx context.Context) (bool, error) {
			_, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
}

func mustParseAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("ingress %q: %v", s, err)
	}
	return a
}

// setPodCIDR allocates cidr to the Node name as the node IPAM controller
// does: spec.podCIDR and spec.podCIDRs, set once.
func (r *run) setPodCIDR(name, cidr string) {
	r.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, cidr, cidr)
	if _, err := r.kube.CoreV1().Nodes().Patch(r.ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		r.t.Fatalf("allocate pod CIDR %s to node %s: %v", cidr, name, err)
	}
}
