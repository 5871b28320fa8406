package deploy_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	_ "github.com/stratus-ccm/stratus/providers/vsphere" // registers "vsphere" for the manager child process
	"github.com/stratus-ccm/stratus/vcsim"
)

// TestChartRBACVSphere runs the manager with the vsphere provider under the
// chart's RBAC, rendered with the credentials Secret in providerSecrets, against
// a simulated vCenter: the provider reads its credentials from that Secret and
// initializes a node, and the lifecycle controller deletes the node when its VM
// is destroyed; the ServiceAccount can read that one Secret and no other, nor
// list the namespace's Secrets.
func TestChartRBACVSphere(t *testing.T) {
	t.Parallel()
	env := ownControlPlane(t)
	ns := env.Namespace(t)
	admin := env.Clientset(t)
	ctx := context.Background()

	applyChartRBAC(t, env, ns, "cloudProvider=vsphere", "providerSecrets[0].name=vsphere-creds")
	sa := env.ServiceAccountConfig(t, ns, "stratus")
	saClient := kubernetes.NewForConfigOrDie(sa)

	v, err := vcsim.Start(t.Context(), vcsim.Options{VMs: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	host, port, _ := net.SplitHostPort(v.Addr())
	for name, data := range map[string]map[string]string{
		"vsphere-creds": {host + ".username": v.Username(), host + ".password": v.Password()},
		"not-ours":      {"password": "s3cret-not-for-stratus"},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
		if _, err := admin.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Least privilege: the one Secret by name (get, and list with a field
	// selector on its name, which the provider's informer uses); nothing else.
	if _, err := saClient.CoreV1().Secrets(ns).Get(ctx, "vsphere-creds", metav1.GetOptions{}); err != nil {
		t.Errorf("get the credentials Secret with the chart's RBAC: %v", err)
	}
	if _, err := saClient.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=vsphere-creds"}); err != nil {
		t.Errorf("list the credentials Secret by name with the chart's RBAC: %v", err)
	}
	if _, err := saClient.CoreV1().Secrets(ns).Get(ctx, "not-ours", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get another Secret in the namespace: err %v, want Forbidden", err)
	}
	if _, err := saClient.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list the namespace's Secrets: err %v, want Forbidden", err)
	}
	if _, err := saClient.CoreV1().Secrets(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=vsphere-creds"}); !apierrors.IsForbidden(err) {
		t.Errorf("list a Secret of that name in another namespace: err %v, want Forbidden", err)
	}

	dir := t.TempDir()
	cloudConfig := filepath.Join(dir, "vsphere.conf")
	ini := fmt.Sprintf("[Global]\nsecret-name = vsphere-creds\nsecret-namespace = %s\nca-file = %s\nport = %s\n\n[VirtualCenter %q]\n\n[Labels]\nregion = k8s-region\nzone = k8s-zone\n",
		ns, v.CAFile(), port, host)
	if err := os.WriteFile(cloudConfig, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	p := managertest.StartProcess(t,
		"--cloud-provider=vsphere", "--cloud-config="+cloudConfig,
		"--cluster-name=rbac-"+ns,
		"--kubeconfig="+managertest.WriteKubeconfig(t, sa),
		"--leader-elect-resource-namespace="+ns,
		"--node-monitor-period=1s",
		"--node-deletion-grace-period=1s",
		"--secure-port="+strconv.Itoa(testsupport.FreePort(t)), "--bind-address=127.0.0.1",
	)
	// Stopped before the simulator (registered earlier, so closed later):
	// the provider then ends its long polls.
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGTERM)
		_ = p.Wait(30 * time.Second)
	})

	vm, err := v.VM(ctx, "node-0")
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
			Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })

	testsupport.Eventually(t, 90*time.Second, "node-0 initialized from its VM", func(ctx context.Context) (bool, error) {
		n, err := admin.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == cloudproviderapi.TaintExternalCloudProvider {
				return false, nil
			}
		}
		return n.Spec.ProviderID == "vsphere://"+vm.UUID && n.Labels[corev1.LabelTopologyZone] == vm.Zone, nil
	})

	// The lifecycle controller deletes the Node once its VM is gone (the
	// Node must be not ready first: a ready Node is never deleted; node-1's
	// VM stays, as an empty listing never deletes anything).
	notReady := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
		time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	if _, err := admin.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, []byte(notReady), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := v.Destroy(ctx, "node-0"); err != nil {
		t.Fatal(err)
	}
	testsupport.EventuallyState(t, 90*time.Second, "node-0 deleted after its VM", func(ctx context.Context) (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		evs, _ := admin.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node.Name})
		var seen []string
		if evs != nil {
			for _, e := range evs.Items {
				seen = append(seen, e.Type+" "+e.Reason+": "+e.Message)
			}
		}
		return false, fmt.Sprintf("node still there (err %v): conditions %v; events %v", err, n.Status.Conditions, seen)
	})
}
