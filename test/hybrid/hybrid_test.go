// Package hybrid tests a hybrid cluster end to end: machines from vSphere (a
// simulated vCenter), load balancers from minicloud, in one stratus-ccm, with
// traffic from minicloud's load balancer to the vSphere nodes.
package hybrid

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
	_ "github.com/stratus-ccm/stratus/providers/vsphere"
	"github.com/stratus-ccm/stratus/vcsim"
)

func TestMain(m *testing.M) {
	managertest.RunHelperProcess()
	testenv.Main(m)
}

// The vSphere VMs' network (vcsim's node addresses) is reached by minicloud's
// load balancers through a loopback block, as a VPN between the two clouds
// would carry it: a node agent of VM i listens on its address's counterpart.
var (
	vmNetwork = netip.MustParsePrefix("10.0.0.0/16")
	viaBlock  = netip.MustParsePrefix("127.78.0.0/16")
)

// nodeIP is VM i's address and agentIP where its node agent listens.
func nodeIP(i int) string { return vcsim.NodeIPv4(i) }

func agentIP(i int) string {
	a := netip.MustParseAddr(nodeIP(i)).As4()
	v := viaBlock.Addr().As4()
	return netip.AddrFrom4([4]byte{v[0], v[1], a[2], a[3]}).String()
}

// TestVSphereNodesMinicloudLoadBalancers: vSphere initializes the nodes (they
// join without a provider ID and are matched by VM name), minicloud serves the
// LoadBalancer Service and sends its traffic to the vSphere nodes'
// InternalIPs; a destroyed VM leaves the load balancer while its Node is still
// kept by the deletion guard.
func TestVSphereNodesMinicloudLoadBalancers(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	admin := env.Clientset(t)
	ctx := context.Background()

	vc, err := vcsim.Start(ctx, vcsim.Options{VMs: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vc.Close)
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond,
		PeerNetworks: []minicloud.PeerNetwork{{Network: vmNetwork, Via: viaBlock}}})

	// The Service comes first, as NodePort, so that each node answers on its
	// NodePort before the load balancer's first health probe.
	svc, nodePort := createNodePortService(t, admin, ns)
	names := vc.Nodes()
	for i, name := range names {
		respond(t, name, agentIP(i), nodePort)
	}

	config := fmt.Sprintf(`apiVersion: stratus.io/v1alpha1
kind: ManagerConfig
providers:
- name: vsphere
  type: vsphere
  cloudConfig: |
%s
- name: mc
  type: minicloud
  cloudConfig: |
    url: %s
    token: %s
    foreignNodes: internalIP
defaultNodeProvider: vsphere
defaultLoadBalancerProvider: mc
`, indent(string(vc.CloudConfig(vcsim.TrustCAFile)), "    "), mc.URL, mc.Token)
	configPath := filepath.Join(t.TempDir(), "stratus.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	managertest.Start(t,
		"--config="+configPath,
		"--cluster-name=hybrid-"+ns,
		"--kubeconfig="+managertest.WriteKubeconfig(t, env.Config),
		"--leader-elect-resource-namespace="+ns,
		"--node-monitor-period=1s",
		"--secure-port=0",
	)

	// The nodes join as kubelets with --cloud-provider=external do.
	for _, name := range names {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
				Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	vms, err := vc.VMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		vm := vms[slices.IndexFunc(vms, func(v vcsim.VM) bool { return v.Name == name })]
		testsupport.EventuallyState(t, 90*time.Second, "node "+name+" initialized by the vSphere provider", func(ctx context.Context) (bool, string) {
			n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ok := n.Spec.ProviderID == "vsphere://"+vm.UUID && n.Labels[corev1.LabelTopologyZone] == vm.Zone &&
				slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: nodeIP(i)}) &&
				!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node.cloudprovider.kubernetes.io/uninitialized" })
			return ok, fmt.Sprintf("providerID %q, labels %v, addresses %v, taints %v", n.Spec.ProviderID, n.Labels, n.Status.Addresses, n.Spec.Taints)
		})
	}

	// The Service asks for a load balancer: minicloud's targets are the
	// vSphere nodes' InternalIPs, and traffic through the VIP reaches both.
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	if _, err := admin.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var vip string
	testsupport.EventuallyState(t, 90*time.Second, "the Service's ingress", func(ctx context.Context) (bool, string) {
		s, err := admin.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, fmt.Sprintf("%v %v", err, s.Status)
		}
		vip = s.Status.LoadBalancer.Ingress[0].IP
		return true, ""
	})
	targets := func() []string {
		lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: string(svc.UID)}})
		if err != nil || len(lbs) != 1 {
			return nil
		}
		var ips []string
		for _, tg := range lbs[0].Targets {
			ips = append(ips, tg.IP+tg.InstanceID)
		}
		slices.Sort(ips)
		return ips
	}
	if got, want := targets(), []string{nodeIP(0), nodeIP(1)}; !slices.Equal(got, want) {
		t.Fatalf("load balancer targets %v, want %v", got, want)
	}
	reaches(t, vip, names...)

	// A VM is destroyed. Its Node stays (it never had a Ready condition, so
	// the guard's grace period holds it), but it leaves the load balancer as
	// soon as the vSphere provider's watch reports the VM gone.
	if err := vc.Destroy(ctx, names[1]); err != nil {
		t.Fatal(err)
	}
	testsupport.EventuallyState(t, 60*time.Second, "the destroyed VM's node out of the load balancer", func(context.Context) (bool, string) {
		got := targets()
		return slices.Equal(got, []string{nodeIP(0)}), fmt.Sprintf("targets %v", got)
	})
	reaches(t, vip, names[0])
	if _, err := admin.CoreV1().Nodes().Get(ctx, names[1], metav1.GetOptions{}); err != nil {
		t.Errorf("the destroyed VM's Node: %v; want it kept by the deletion guard's grace period", err)
	}
}

// createNodePortService creates Service "web" of type NodePort on a NodePort it
// picks, retrying while the port is taken.
func createNodePortService(t *testing.T, admin kubernetes.Interface, ns string) (*corev1.Service, int32) {
	t.Helper()
	var lastErr error
	for range 20 {
		port := int32(30000 + rand.IntN(2768))
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: port, Protocol: corev1.ProtocolTCP}}},
		}
		out, err := admin.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
		if err == nil {
			return out, port
		}
		lastErr = err
	}
	t.Fatalf("create service web with a free NodePort: %v", lastErr)
	return nil, 0
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// respond stands in for kube-proxy and a pod on a node: HTTP on ip:port
// answers the node's name.
func respond(t *testing.T, node, ip string, port int32) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	if err != nil {
		t.Fatalf("node %s: listen on its NodePort: %v", node, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, node) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// reaches waits until HTTP requests through vip:80 reach exactly the named
// nodes.
func reaches(t *testing.T, vip string, want ...string) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	slices.Sort(want)
	testsupport.EventuallyState(t, 30*time.Second, fmt.Sprintf("traffic through %s reaching %v", vip, want), func(context.Context) (bool, string) {
		seen := map[string]bool{}
		for range 8 {
			resp, err := hc.Get("http://" + net.JoinHostPort(vip, "80") + "/")
			if err != nil {
				return false, err.Error()
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen[strings.TrimSpace(string(body))] = true
		}
		var got []string
		for n := range seen {
			got = append(got, n)
		}
		slices.Sort(got)
		return slices.Equal(got, want), fmt.Sprintf("reached %v", got)
	})
}
