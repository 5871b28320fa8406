package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	mcserver "github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
	"github.com/stratus-ccm/stratus/providers/minicloud"   // also registers "minicloud" for the manager child process
	_ "github.com/stratus-ccm/stratus/providers/openstack" // registers "openstack" for the manager child process
)

// TestChartRBACRunsEveryController runs the manager in a child process with the
// chart's ServiceAccount token against a real minicloud, with all four controllers
// on, and checks that each one can do its whole job under the chart's RBAC: node
// initialization, a route and the NetworkUnavailable condition, a load balancer
// created and then deleted with its finalizer removed, and a node whose instance
// is gone deleted by the lifecycle controller. It runs with the minicloud
// provider and with the OpenStack provider on minicloud's OpenStack dialect
// (the vSphere provider, which reads a Secret, has TestChartRBACVSphere).
func TestChartRBACRunsEveryController(t *testing.T) {
	t.Parallel()
	for _, c := range []rbacCloud{
		{name: "minicloud", providerID: "minicloud://", args: minicloudArgs, loadBalancers: minicloudLoadBalancers},
		{name: "openstack", providerID: "openstack:///", openstack: true, args: openstackArgs, loadBalancers: openstackLoadBalancers},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runEveryController(t, c)
		})
	}
}

// rbacCloud is how one provider is configured for runEveryController.
type rbacCloud struct {
	name       string
	providerID string // the prefix of its provider IDs
	openstack  bool   // minicloud serves its OpenStack dialect
	// args are the manager's provider flags for the cloud mc.
	args func(t *testing.T, mc *minicloudtest.Cloud) []string
	// loadBalancers counts the cloud's load balancers of Service ns/name.
	loadBalancers func(ctx context.Context, mc *minicloudtest.Cloud, clusterName, ns, name string) (int, error)
}

func minicloudArgs(t *testing.T, mc *minicloudtest.Cloud) []string {
	config := fmt.Sprintf(`apiVersion: stratus.io/v1alpha1
kind: ManagerConfig
providers:
- name: mc
  type: minicloud
  instanceCacheFreshness: 1s
  cloudConfig: |
    url: %s
    token: %s
defaultNodeProvider: mc
defaultLoadBalancerProvider: mc
routesProvider: mc
`, mc.URL, mc.Token)
	path := filepath.Join(t.TempDir(), "stratus.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--config=" + path}
}

// minicloudLoadBalancers: only this Service's, by the provider's tags:
// Services other tests left in their namespaces (no namespace controller runs
// here) get load balancers from this manager too.
func minicloudLoadBalancers(ctx context.Context, mc *minicloudtest.Cloud, clusterName, ns, name string) (int, error) {
	lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{
		minicloud.TagCluster: clusterName, minicloud.TagServiceNamespace: ns, minicloud.TagServiceName: name,
	}})
	return len(lbs), err
}

func openstackArgs(t *testing.T, mc *minicloudtest.Cloud) []string {
	topo, err := devenv.LookupOpenStack(t.Context(), mc.IdentityURL, mc.Token)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cloud.conf")
	if err := os.WriteFile(path, devenv.OpenStackCloudConf(mc.IdentityURL, "ccm", mc.Token, topo), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--cloud-provider=openstack", "--cloud-config=" + path}
}

// openstackLoadBalancers: only this Service's, asked of Octavia by the name
// the provider gives it (kube_service_<cluster>_<namespace>_<name>).
func openstackLoadBalancers(ctx context.Context, mc *minicloudtest.Cloud, clusterName, ns, name string) (int, error) {
	pc, err := gos.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: mc.IdentityURL, Username: "rbac-test", Password: mc.Token,
		DomainName: openstack.DomainName, TenantName: openstack.ProjectName,
	})
	if err != nil {
		return 0, err
	}
	lc, err := gos.NewLoadBalancerV2(pc, gophercloud.EndpointOpts{Region: mcserver.Region})
	if err != nil {
		return 0, err
	}
	pages, err := loadbalancers.List(lc, loadbalancers.ListOpts{Name: "kube_service_" + clusterName + "_" + ns + "_" + name}).AllPages(ctx)
	if err != nil {
		return 0, err
	}
	lbs, err := loadbalancers.ExtractLoadBalancers(pages)
	return len(lbs), err
}

func runEveryController(t *testing.T, c rbacCloud) {
	env := ownControlPlane(t)
	ns := env.Namespace(t)
	admin := env.Clientset(t)
	ctx := context.Background()

	applyChartRBAC(t, env, ns, "cloudProvider="+c.name)
	sa := env.ServiceAccountConfig(t, ns, "stratus")

	opts := minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond}
	if c.openstack {
		opts.OpenStack = &openstack.Options{}
	}
	mc := minicloudtest.Start(t, opts)
	instA, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: "rbac-a-" + ns, Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	instB, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: "rbac-b-" + ns, Type: "mc.small", Zone: "mc-central-b"})
	if err != nil {
		t.Fatal(err)
	}

	clusterName := "rbac-" + ns
	managertest.StartProcess(t, append(c.args(t, mc),
		"--cluster-name="+clusterName,
		"--kubeconfig="+managertest.WriteKubeconfig(t, sa),
		"--leader-elect-resource-namespace="+ns,
		"--cluster-cidr=10.244.0.0/16",
		"--configure-cloud-routes=true",
		"--route-reconciliation-period=1s",
		"--node-monitor-period=1s",
		"--node-deletion-grace-period=1s",
		"--secure-port="+strconv.Itoa(testsupport.FreePort(t)), "--bind-address=127.0.0.1",
	)...)

	nodeA := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: instA.Name},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}, Taints: []corev1.Taint{{
			Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}
	nodeB := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: instB.Name},
		Spec:       corev1.NodeSpec{ProviderID: c.providerID + instB.ID},
	}
	for _, n := range []*corev1.Node{nodeA, nodeB} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		name := n.Name
		t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	// Node B stopped heartbeating an hour ago.
	notReady := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
		time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	if _, err := admin.CoreV1().Nodes().Patch(ctx, nodeB.Name, types.StrategicMergePatchType, []byte(notReady), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}

	// cloud node controller: node A initialized from its instance.
	testsupport.Eventually(t, 90*time.Second, "node A to be initialized", func(ctx context.Context) (bool, error) {
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeA.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
				return false, nil
			}
		}
		return n.Spec.ProviderID == c.providerID+instA.ID && n.Labels[corev1.LabelTopologyZone] == "mc-central-a", nil
	})

	// route controller: a minicloud route for node A's pod CIDR and the condition.
	testsupport.Eventually(t, 60*time.Second, "node A's route and NetworkUnavailable=False", func(ctx context.Context) (bool, error) {
		routes, err := mc.Client.ListRoutes(ctx, client.ListOptions{})
		if err != nil {
			return false, err
		}
		routed := false
		for _, r := range routes {
			routed = routed || (r.DestinationCIDR == "10.244.1.0/24" && r.TargetInstanceID == instA.ID)
		}
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeA.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeNetworkUnavailable {
				return routed && c.Status == corev1.ConditionFalse && c.Reason == "RouteCreated", nil
			}
		}
		return false, nil
	})

	// service controller: a load balancer with ingress, then deleted with the
	// Service (finalizer removed through the status subresource).
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.EventuallyState(t, 90*time.Second, "the load balancer's ingress", func(ctx context.Context) (bool, string) {
		s, err := admin.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		lbs, err := c.loadBalancers(ctx, mc, clusterName, ns, svc.Name)
		return len(s.Status.LoadBalancer.Ingress) == 1 && len(s.Finalizers) == 1 && err == nil && lbs == 1,
			fmt.Sprintf("ingress %v, finalizers %v; the Service's load balancers in the cloud %d (err %v)", s.Status.LoadBalancer.Ingress, s.Finalizers, lbs, err)
	})

	// lifecycle controller: node B's instance deleted, node B deleted.
	if err := mc.Client.DeleteInstance(ctx, instB.ID); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 90*time.Second, "node B to be deleted", func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Nodes().Get(ctx, nodeB.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	if err := admin.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.EventuallyState(t, 90*time.Second, "the Service and its load balancer to be gone", func(ctx context.Context) (bool, string) {
		s, err := admin.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("service still there (err %v): finalizers %v, deletion %v", err, s.Finalizers, s.DeletionTimestamp)
		}
		lbs, err := c.loadBalancers(ctx, mc, clusterName, ns, svc.Name)
		return err == nil && lbs == 0, fmt.Sprintf("service gone; %d load balancers of it left (err %v)", lbs, err)
	})
}
