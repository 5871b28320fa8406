// Package integration runs stratus's manager, with its real node,
// node-lifecycle, service and route controllers, against the openstack
// provider and minicloud's OpenStack dialect, on a real API server.
package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"

	_ "github.com/stratus-ccm/stratus/providers/openstack" // registers "openstack"
)

func TestMain(m *testing.M) {
	managertest.RunHelperProcess() // the managers run as child processes of this binary
	testenv.Main(m)
}

// cloud is a minicloud with the OpenStack dialect and the IDs an operator
// would put in cloud.conf.
type cloud struct {
	mc               *minicloudtest.Cloud
	vipSubnet, route string
}

func startCloud(t *testing.T, o mos.Options) *cloud {
	t.Helper()
	mc := minicloudtest.Start(t, minicloudtest.Options{OpenStack: &o})
	ctx := context.Background()
	pc, err := gos.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: mc.IdentityURL, Username: "t", Password: mc.Token,
		DomainName: mos.DomainName, TenantName: mos.ProjectName, AllowReauth: true})
	if err != nil {
		t.Fatal(err)
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
	pages, err = routers.List(nc, routers.ListOpts{Name: "minicloud"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := routers.ExtractRouters(pages)
	if len(subs) != 1 || len(rs) != 1 {
		t.Fatalf("vips subnet %+v, routers %+v", subs, rs)
	}
	return &cloud{mc: mc, vipSubnet: subs[0].ID, route: rs[0].ID}
}

// startManager runs stratus's manager with the openstack provider (type
// openstack in the manager configuration, upstream's cloud.conf), with
// short periods.
func startManager(t *testing.T, env *testenv.Env, c *cloud, controllers string) {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf("[Global]\nauth-url = %s\nusername = ccm\npassword = %s\nuser-domain-name = %s\ntenant-name = %s\ndomain-name = %s\nregion = %s\n"+
		"[LoadBalancer]\nsubnet-id = %s\n[Route]\nrouter-id = %s\n",
		c.mc.IdentityURL, c.mc.Token, mos.DomainName, mos.ProjectName, mos.DomainName, minicloud.Region, c.vipSubnet, c.route)
	cloudConfig := filepath.Join(dir, "cloud.conf")
	if err := os.WriteFile(cloudConfig, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	managerConfig := filepath.Join(dir, "manager.yaml")
	mc := fmt.Sprintf("apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\nproviders:\n- name: openstack\n  type: openstack\n  cloudConfigFile: %s\n  instanceCacheFreshness: 1s\n", cloudConfig)
	if err := os.WriteFile(managerConfig, []byte(mc), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := managertest.WriteKubeconfig(t, env.Config)
	p := managertest.StartProcess(t, "--config="+managerConfig,
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0",
		"--controllers="+controllers, "--node-monitor-period=1s", "--node-deletion-grace-period=2s",
		"--cluster-cidr=10.244.0.0/16", "--route-reconciliation-period=1s")
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGTERM)
		_ = p.Wait(30 * time.Second)
	})
}

// join creates a Node as kubelet --cloud-provider=external does, Ready or
// NotReady, with a pod CIDR when given.
func join(t *testing.T, cs kubernetes.Interface, name string, ready bool, podCIDR string) {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionUnknown
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: n.CreationTimestamp, LastTransitionTime: n.CreationTimestamp}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func initialized(t *testing.T, cs kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	testsupport.Eventually(t, 90*time.Second, name+" to be initialized", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = n
		return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }), nil
	})
	return node
}

func (c *cloud) instance(t *testing.T, name string) *api.Instance {
	t.Helper()
	in, err := c.mc.Client.CreateInstance(context.Background(), api.InstanceCreate{Name: name, Type: "mc.small", Zone: minicloud.Zones[0]})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// requests is how many times the dialect served op since the last reset.
func (c *cloud) requests(t *testing.T, op string) int64 {
	t.Helper()
	st, err := c.mc.Client.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Requests[op]
}

// TestLifecycleCloudDown: a node is initialized from Nova (provider ID,
// InternalIP, zone, instance type); while Keystone and Nova answer 500
// (the token expiring every 2 s), the NotReady node's server cannot be
// looked up and the node is not deleted, even after many lookups; once
// the cloud answers again and the server is deleted, the node is.
func TestLifecycleCloudDown(t *testing.T) {
	env := testenv.Get(t)
	cs := env.Clientset(t)
	c := startCloud(t, mos.Options{TokenTTL: 2 * time.Second})
	in := c.instance(t, "os-node-1")
	// Another server, so that the listing is not empty once os-node-1's
	// server is gone (an empty listing never deletes nodes).
	c.instance(t, "os-other")
	startManager(t, env, c, "cloud-node,cloud-node-lifecycle")
	join(t, cs, "os-node-1", false, "")
	node := initialized(t, cs, "os-node-1")
	if node.Spec.ProviderID != "openstack:///"+in.ID || node.Labels[corev1.LabelInstanceTypeStable] != "mc.small" || node.Labels[corev1.LabelTopologyZone] != in.Zone {
		t.Errorf("node %s: provider ID %q, labels %v", node.Name, node.Spec.ProviderID, node.Labels)
	}
	if !slices.Contains(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: in.PrivateIP}) {
		t.Errorf("addresses %v, want InternalIP %s", node.Status.Addresses, in.PrivateIP)
	}

	ctx := context.Background()
	nova := []string{"GET /compute/v2.1/servers/detail", "GET /compute/v2.1/servers/{id}"}
	keystone := "POST /identity/v3/auth/tokens"
	for _, phase := range []struct {
		what  string
		ops   []string
		count func() int64
	}{
		{"Nova answers 500", nova, func() int64 { return c.requests(t, nova[0]) + c.requests(t, nova[1]) }},
		// Requests with the expired token get 401s, and renewing it 500s.
		{"Keystone answers 500 too", append([]string{keystone}, nova...), func() int64 { return c.requests(t, keystone) }},
	} {
		if err := c.mc.Client.ResetStats(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.mc.Client.SetFaults(ctx, api.Faults{ErrorRate: 1, Operations: phase.ops}); err != nil {
			t.Fatal(err)
		}
		// Many failed lookups, well past the deletion grace period.
		testsupport.Eventually(t, 90*time.Second, "failed lookups while "+phase.what, func(ctx context.Context) (bool, error) { return phase.count() >= 5, nil })
		if _, err := cs.CoreV1().Nodes().Get(ctx, "os-node-1", metav1.GetOptions{}); err != nil {
			t.Fatalf("node while %s: %v; want it kept", phase.what, err)
		}
	}
	if _, err := c.mc.Client.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	if err := c.mc.Client.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 90*time.Second, "os-node-1 to be deleted", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().Get(ctx, "os-node-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestServicesAndRoutes: through the service controller, a Service gets
// an Octavia load balancer whose VIP carries traffic to both nodes; a
// Service asking for SCTP gets a Warning event and a LoadBalancerReady
// condition naming spec.ports[0].protocol, and no load balancer. The route
// controller gives each node's pod CIDR an extra route via its InternalIP
// (the extension-less path: extraroute-atomic hidden).
func TestServicesAndRoutes(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	c := startCloud(t, mos.Options{HiddenExtensions: []string{"extraroute-atomic"}})
	ctx := context.Background()
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 18400}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ins []*api.Instance
	for i, name := range []string{"os-a", "os-b"} {
		in := c.instance(t, name)
		ins = append(ins, in)
		minicloudtest.StartBackend(t, name, in.PrivateIP, minicloudtest.BackendOptions{TCP: true, Port: int(svc.Spec.Ports[0].NodePort)})
		join(t, cs, name, true, fmt.Sprintf("10.244.%d.0/24", i+1))
	}
	startManager(t, env, c, "cloud-node,service,route")
	for _, in := range ins {
		initialized(t, cs, in.Name)
	}

	var ip string
	testsupport.Eventually(t, 90*time.Second, "the load balancer's ingress", func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return true, nil
	})
	testsupport.Eventually(t, 90*time.Second, "traffic to both nodes", func(context.Context) (bool, error) {
		got := minicloudtest.CountTCP(t, net.JoinHostPort(ip, strconv.Itoa(18400)), 6)
		return got["os-a"] > 0 && got["os-b"] > 0, nil
	})

	// A node joins: one batch member update, after which Octavia is
	// PENDING_UPDATE (the provider's RetryError). That is normal life:
	// traffic reaches the new node and no Warning is recorded.
	inC := c.instance(t, "os-c")
	minicloudtest.StartBackend(t, "os-c", inC.PrivateIP, minicloudtest.BackendOptions{TCP: true, Port: int(svc.Spec.Ports[0].NodePort)})
	join(t, cs, "os-c", true, "10.244.3.0/24")
	initialized(t, cs, "os-c")
	testsupport.Eventually(t, 90*time.Second, "traffic to the joined node", func(context.Context) (bool, error) {
		return minicloudtest.CountTCP(t, net.JoinHostPort(ip, strconv.Itoa(18400)), 6)["os-c"] > 0, nil
	})
	// The full ensure that finishes the update records EnsuredLoadBalancer
	// a second time (the recorder counts repeats), after any event of the
	// update itself.
	testsupport.Eventually(t, 90*time.Second, "the Service ensured again after the join", func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=EnsuredLoadBalancer"})
		if err != nil {
			return false, err
		}
		var n int32
		for _, e := range list.Items {
			n += max(1, e.Count)
		}
		return n >= 2, nil
	})
	warnings, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,type=Warning"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range warnings.Items {
		t.Errorf("Warning on Service web during healthy operation: %s: %s", e.Reason, e.Message)
	}

	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "sctp"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolSCTP, Port: 18401}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 90*time.Second, "a Warning event naming spec.ports[0].protocol", func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=sctp,reason=SyncLoadBalancerFailed"})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "spec.ports[0].protocol")
		}), nil
	})
	testsupport.Eventually(t, 90*time.Second, "a LoadBalancerReady condition naming spec.ports[0].protocol", func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Services(ns).Get(ctx, "sctp", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(s.Status.Conditions, "LoadBalancerReady")
		return cond != nil && cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, "spec.ports[0].protocol"), nil
	})

	testsupport.Eventually(t, 90*time.Second, "a route per node", func(ctx context.Context) (bool, error) {
		rts, err := c.mc.Client.ListRoutes(ctx, client.ListOptions{})
		if err != nil {
			return false, err
		}
		got := map[string]string{}
		for _, r := range rts {
			got[r.DestinationCIDR] = r.TargetInstanceID
		}
		return got["10.244.1.0/24"] == ins[0].ID && got["10.244.2.0/24"] == ins[1].ID, nil
	})
	if n := c.requests(t, "PUT /network/v2.0/routers/{id}/add_extraroutes"); n != 0 {
		t.Errorf("add_extraroutes called %d times though the extension is hidden", n)
	}
}
