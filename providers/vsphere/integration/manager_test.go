// Package integration runs stratus's manager, with its real node and node
// lifecycle controllers, against the vsphere provider and govmomi's
// in-process vCenter simulator, on a real API server.
package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/vcsim"

	_ "github.com/stratus-ccm/stratus/providers/vsphere" // registers "vsphere"
)

func TestMain(m *testing.M) {
	managertest.RunHelperProcess() // the managers run as child processes of this binary
	testenv.Main(m)
}

// startVCenter runs a simulated vCenter with n node VMs (node-0, ...) that
// report host names and IPs, in zones and regions tagged as upstream's
// documentation does, until the test ends.
func startVCenter(t *testing.T, n int) *vcsim.Server {
	t.Helper()
	s, err := vcsim.Start(t.Context(), vcsim.Options{VMs: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// startManager runs stratus's manager with the vsphere provider, reading
// its credentials from a Secret in ns, with short lifecycle periods.
func startManager(t *testing.T, env *testenv.Env, ns string, v *vcsim.Server) {
	t.Helper()
	host, port, _ := net.SplitHostPort(v.Addr())
	dir := t.TempDir()
	cloudConfig := filepath.Join(dir, "vsphere.conf")
	// upstream's legacy INI form, with the Secret
	ini := fmt.Sprintf("[Global]\nsecret-name = vsphere-creds\nsecret-namespace = %s\nca-file = %s\nport = %s\n\n[VirtualCenter %q]\n\n[Labels]\nregion = k8s-region\nzone = k8s-zone\n",
		ns, v.CAFile(), port, host)
	if err := os.WriteFile(cloudConfig, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	managerConfig := filepath.Join(dir, "manager.yaml")
	mc := fmt.Sprintf("apiVersion: stratus.io/v1alpha1\nkind: ManagerConfig\nproviders:\n- name: vsphere\n  type: vsphere\n  cloudConfigFile: %s\n  instanceCacheFreshness: 1s\n", cloudConfig)
	if err := os.WriteFile(managerConfig, []byte(mc), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := managertest.WriteKubeconfig(t, env.Config)
	p := managertest.StartProcess(t, "--config="+managerConfig,
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0",
		"--controllers=cloud-node,cloud-node-lifecycle", "--node-monitor-period=1s", "--node-deletion-grace-period=2s")
	// Stop it gracefully before the simulator (registered earlier, so
	// cleaned up later): the provider then ends its long polls.
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGTERM)
		_ = p.Wait(30 * time.Second)
	})
}

func secret(t *testing.T, cs kubernetes.Interface, ns string, v *vcsim.Server, password string) {
	t.Helper()
	host, _, _ := net.SplitHostPort(v.Addr())
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-creds", Namespace: ns},
		StringData: map[string]string{host + ".username": v.Username(), host + ".password": password}}
	if _, err := cs.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// join creates a Node as kubelet --cloud-provider=external does, NotReady
// since its creation when notReady is set.
func join(t *testing.T, cs kubernetes.Interface, name, systemUUID string, notReady bool) {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	status := corev1.ConditionTrue
	if notReady {
		status = corev1.ConditionUnknown
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.NodeInfo.SystemUUID = systemUUID
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: n.CreationTimestamp, LastTransitionTime: n.CreationTimestamp}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// TestNodeLifecycle: a node that joins without a provider ID is matched to
// its VM by the guest host name and initialized with the vsphere provider
// ID, addresses, instance type and zone labels; when the VM is destroyed,
// the node is deleted after the grace period.
func TestNodeLifecycle(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	v := startVCenter(t, 2)
	secret(t, cs, ns, v, v.Password())
	startManager(t, env, ns, v)
	vm, err := v.VM(t.Context(), "node-1")
	if err != nil {
		t.Fatal(err)
	}

	join(t, cs, "node-1", "", true)
	var node *corev1.Node
	testsupport.Eventually(t, 90*time.Second, "node-1 to be initialized", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = n
		return !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider), nil
	})
	if node.Spec.ProviderID != "vsphere://"+vm.UUID {
		t.Errorf("provider ID = %q, want vsphere://%s", node.Spec.ProviderID, vm.UUID)
	}
	want := map[string]string{
		corev1.LabelInstanceTypeStable: "vsphere-vm.cpu-2.mem-4gb.os-ubuntu",
		corev1.LabelTopologyZone:       vm.Zone,
		corev1.LabelTopologyRegion:     vm.Region,
	}
	for k, val := range want {
		if node.Labels[k] != val || val == "" {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], val)
		}
	}
	ip := vm.Guest.NICs[0].IPs[0]
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-1"}, {Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeExternalIP, Address: ip}}
	if fmt.Sprint(node.Status.Addresses) != fmt.Sprint(wantAddrs) {
		t.Errorf("addresses = %v, want %v", node.Status.Addresses, wantAddrs)
	}

	if err := v.Destroy(t.Context(), "node-1"); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 90*time.Second, "node-1 to be deleted", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestWrongCredentials: with a password vCenter refuses, a joining node
// stays tainted with a Warning event that says why, and a NotReady node
// whose VM is gone is not deleted (the listing failed). Once the Secret
// has the right password, the first is initialized and the second deleted.
func TestWrongCredentials(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	v := startVCenter(t, 1)
	host, _, _ := net.SplitHostPort(v.Addr())
	secret(t, cs, ns, v, "not-the-password")
	startManager(t, env, ns, v)

	// An initialized node whose VM does not exist, NotReady since it joined.
	join(t, cs, "old-node", "", true)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "old-node", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.ProviderID = "vsphere://00000000-0000-0000-0000-0000000000ff"
		n.Spec.Taints = nil
		_, err = cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	join(t, cs, "node-0", "", false)

	var events []corev1.Event
	testsupport.Eventually(t, 90*time.Second, "two failed initializations of node-0", func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=node-0,reason=InitializationFailed"})
		if err != nil {
			return false, err
		}
		events = list.Items
		count := int32(0)
		for _, e := range list.Items {
			count += max(e.Count, 1)
		}
		return count >= 2, nil
	})
	msg := events[0].Message
	if events[0].Type != corev1.EventTypeWarning || !strings.Contains(msg, "vCenter refused the user name or password") {
		t.Errorf("event %s: %q", events[0].Type, msg)
	}
	if strings.Contains(msg, "not-the-password") {
		t.Errorf("the event shows the password: %q", msg)
	}
	testsupport.Eventually(t, 90*time.Second, "the lifecycle controller to hold old-node's deletion back", func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=old-node,reason=NodeDeletionBlocked"})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, "instance listing of provider vsphere failed") && strings.Contains(e.Message, "vCenter refused") {
				return true, nil
			}
		}
		return false, nil
	})
	for _, name := range []string{"node-0", "old-node"} {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
		if name == "node-0" && (!hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) || n.Spec.ProviderID != "") {
			t.Errorf("node-0 was initialized with wrong credentials: %+v", n.Spec)
		}
	}

	// With the password fixed in the Secret, the node is initialized.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cs.CoreV1().Secrets(ns).Get(context.Background(), "vsphere-creds", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data[host+".password"] = []byte(v.Password())
		_, err = cs.CoreV1().Secrets(ns).Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 90*time.Second, "node-0 to be initialized with the fixed password", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) && strings.HasPrefix(n.Spec.ProviderID, "vsphere://"), nil
	})
	testsupport.Eventually(t, 90*time.Second, "old-node, whose VM is gone, to be deleted", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().Get(ctx, "old-node", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestVMWithoutIPs: a VM whose guest reports no IP addresses (VMware Tools not
// running yet) leaves its joining node tainted, with a Warning event saying
// why; once the guest reports an address, the node is initialized with it.
func TestVMWithoutIPs(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	v := startVCenter(t, 1)
	if err := v.SetGuest(t.Context(), "node-0", vcsim.Guest{Hostname: "node-0"}); err != nil {
		t.Fatal(err)
	}
	secret(t, cs, ns, v, v.Password())
	startManager(t, env, ns, v)
	join(t, cs, "node-0", "", false)
	joined, err := cs.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Other tests of the package had a node-0 too: only this Node's events count.
	var event corev1.Event
	testsupport.Eventually(t, 90*time.Second, "an InitializationFailed event for node-0", func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=node-0,involvedObject.uid=" + string(joined.UID) + ",reason=InitializationFailed"})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		event = list.Items[0]
		return true, nil
	})
	if event.Type != corev1.EventTypeWarning || !strings.Contains(event.Message, "no IP addresses") {
		t.Errorf("event %s: %q; want a Warning saying the VM has no IP addresses", event.Type, event.Message)
	}
	n, err := cs.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) || n.Spec.ProviderID != "" {
		t.Fatalf("node-0 initialized without addresses: provider ID %q, taints %v", n.Spec.ProviderID, n.Spec.Taints)
	}

	const ip = "10.0.7.7"
	if err := v.SetGuest(t.Context(), "node-0", vcsim.Guest{Hostname: "node-0", NICs: []vcsim.NIC{{Network: "VM Network", IPs: []string{ip}}}}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 90*time.Second, "node-0 initialized with the guest's address", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) &&
			slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}), nil
	})
}
