// Package plugin tests providers run out of process (pkg/plugin) end to end:
// the real stratus-ccm manager against a real control plane, its provider a
// `stratus-ccm plugin serve` child process serving minicloud or vSphere, and
// the plugin killed with SIGKILL while nodes join and load balancers are
// created.
package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/app"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
	_ "github.com/stratus-ccm/stratus/providers/vsphere" // served by TestVSpherePlugin
	"github.com/stratus-ccm/stratus/vcsim"
)

// pluginEnv carries the command line of a `stratus-ccm plugin serve` child.
const pluginEnv = "STRATUS_PLUGINTEST_ARGS"

func TestMain(m *testing.M) {
	managertest.RunHelperProcess()
	if raw := os.Getenv(pluginEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(app.Main("test", args...))
	}
	testenv.Main(m)
}

// pluginProcess is `stratus-ccm plugin serve` in a child process (the test
// binary re-executed), which a test can kill with SIGKILL and start again.
type pluginProcess struct {
	t    *testing.T
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  strings.Builder
}

func startPlugin(t *testing.T, args ...string) *pluginProcess {
	t.Helper()
	p := &pluginProcess{t: t, args: append([]string{"plugin", "serve"}, args...)}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("plugin output:\n%s", p.out.String())
			p.mu.Unlock()
		}
	})
	return p
}

func (p *pluginProcess) start() {
	p.t.Helper()
	raw, err := json.Marshal(p.args)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), pluginEnv+"="+string(raw))
	w := &lockedWriter{p: p}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *pluginProcess) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
}

type lockedWriter struct{ p *pluginProcess }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

// fixture is a control plane, minicloud, a minicloud plugin and a manager
// using it as its only provider.
type fixture struct {
	t      *testing.T
	admin  kubernetes.Interface
	ns     string
	mc     *minicloudtest.Cloud
	plugin *pluginProcess
	mgr    *managertest.Manager // nil when the manager runs in a child process
}

// newFixture starts the manager in this process when inProcess (its metrics
// can then be read; one test binary can only run one in-process manager, whose
// controller names are global), else in a child process.
func newFixture(t *testing.T, inProcess bool) *fixture {
	env := testenv.Get(t)
	f := &fixture{t: t, admin: env.Clientset(t), ns: env.Namespace(t)}
	f.mc = minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 2 * time.Second})
	dir, err := os.MkdirTemp("", "plugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "mc.sock")
	cloudConfig := filepath.Join(dir, "minicloud.yaml")
	if err := os.WriteFile(cloudConfig, fmt.Appendf(nil, "url: %s\ntoken: %s\n", f.mc.URL, f.mc.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := managertest.WriteKubeconfig(t, env.Config)
	f.plugin = startPlugin(t, "--provider=minicloud", "--cloud-config="+cloudConfig, "--socket="+socket, "--kubeconfig="+kubeconfig)

	config := fmt.Sprintf(`apiVersion: stratus.io/v1alpha1
kind: ManagerConfig
providers:
- name: mc
  type: plugin
  plugin:
    address: unix://%s
    connectTimeout: 1m
  instanceCacheFreshness: 1s
  budget: {maxRetries: 1}
`, socket)
	configPath := filepath.Join(dir, "stratus.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--config=" + configPath,
		"--cluster-name=" + f.ns,
		"--kubeconfig=" + kubeconfig,
		"--leader-elect-resource-namespace=" + f.ns,
		"--node-monitor-period=1s",
		"--node-deletion-grace-period=1s",
		"--configure-cloud-routes=false",
		"--secure-port=0",
	}
	if inProcess {
		f.mgr = managertest.Start(t, args...)
	} else {
		managertest.StartProcess(t, args...)
	}
	return f
}

const uninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// instanceAndNode creates a minicloud instance and its Node, which joins
// without a provider ID and has been NotReady for an hour: the state in
// which a wrong "instance gone" answer gets a Node deleted.
func (f *fixture) instanceAndNode(name string) *api.Instance {
	f.t.Helper()
	ctx := context.Background()
	inst, err := f.mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: name, Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		f.t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: uninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
	n, err = f.admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = f.admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	hourAgo := metav1.NewTime(time.Now().Add(-time.Hour))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletStopped", LastHeartbeatTime: hourAgo, LastTransitionTime: hourAgo}}
	if _, err := f.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	return inst
}

// initialized waits for the node to carry its instance's provider ID and
// address, without the uninitialized taint.
func (f *fixture) initialized(name string, inst *api.Instance, timeout time.Duration) {
	f.t.Helper()
	testsupport.EventuallyState(f.t, timeout, "node "+name+" initialized through the plugin", func(ctx context.Context) (bool, string) {
		if f.mgr != nil {
			select {
			case <-f.mgr.Done():
				f.t.Fatalf("the manager stopped: %v", f.mgr.Err())
			default:
			}
		}
		n, err := f.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := n.Spec.ProviderID == mcprovider.ProviderID(inst.ID) && n.Labels[corev1.LabelTopologyZone] == "mc-central-a" &&
			slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: inst.PrivateIP}) &&
			!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitialized })
		return ok, fmt.Sprintf("providerID %q, labels %v, addresses %v, taints %v", n.Spec.ProviderID, n.Labels, n.Status.Addresses, n.Spec.Taints)
	})
}

// loadBalancerService creates a LoadBalancer Service on a free NodePort and
// starts a backend on that port on each instance.
func (f *fixture) loadBalancerService(name string, insts ...*api.Instance) *corev1.Service {
	f.t.Helper()
	var lastErr error
	for range 20 {
		port := int32(30000 + rand.IntN(2768))
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Name: "tcp", Port: 80, NodePort: port, Protocol: corev1.ProtocolTCP}}}}
		out, err := f.admin.CoreV1().Services(f.ns).Create(context.Background(), svc, metav1.CreateOptions{})
		if err == nil {
			for _, inst := range insts {
				minicloudtest.StartBackend(f.t, inst.Name, inst.PrivateIP, minicloudtest.BackendOptions{TCP: true, Port: int(port)})
			}
			return out
		}
		lastErr = err
	}
	f.t.Fatalf("create service %s: %v", name, lastErr)
	return nil
}

// ingress waits for the Service's load-balancer address.
func (f *fixture) ingress(name string, timeout time.Duration) string {
	f.t.Helper()
	var vip string
	testsupport.EventuallyState(f.t, timeout, "service "+name+"'s ingress", func(ctx context.Context) (bool, string) {
		s, err := f.admin.CoreV1().Services(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, fmt.Sprintf("%v %v", err, s.Status)
		}
		vip = s.Status.LoadBalancer.Ingress[0].IP
		return true, ""
	})
	return vip
}

// reaches waits until connections through vip:80 reach exactly the named
// backends.
func reaches(t *testing.T, vip string, want ...string) {
	t.Helper()
	slices.Sort(want)
	addr := net.JoinHostPort(vip, "80")
	testsupport.EventuallyState(t, 30*time.Second, fmt.Sprintf("traffic through %s reaching %v", addr, want), func(context.Context) (bool, string) {
		seen := map[string]bool{}
		for range 8 {
			name, c, err := minicloudtest.DialTCP(addr, "")
			if err != nil {
				return false, err.Error()
			}
			c.Close()
			seen[name] = true
		}
		var got []string
		for n := range seen {
			got = append(got, n)
		}
		slices.Sort(got)
		return slices.Equal(got, want), fmt.Sprintf("reached %v", got)
	})
}

// loadBalancers lists minicloud's load balancers of the test's namespace by
// the Service names they were created for.
func (f *fixture) loadBalancers() []string {
	f.t.Helper()
	lbs, err := f.mc.Client.ListLoadBalancers(context.Background(), client.ListOptions{Tags: map[string]string{mcprovider.TagServiceNamespace: f.ns}})
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, lb := range lbs {
		names = append(names, lb.Tags[mcprovider.TagServiceName])
	}
	slices.Sort(names)
	return names
}

// The controllers' key behaviours through a plugin: nodes are initialized
// from the plugin's metadata, a LoadBalancer Service gets a minicloud load
// balancer that carries traffic to its nodes, and the Node of a deleted
// instance is deleted by the lifecycle controller.
func TestControllersThroughPlugin(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	a, b := f.instanceAndNode("ctl-a"), f.instanceAndNode("ctl-b")
	f.initialized("ctl-a", a, 90*time.Second)
	f.initialized("ctl-b", b, 90*time.Second)

	f.loadBalancerService("web", a, b)
	vip := f.ingress("web", 90*time.Second)
	reaches(t, vip, "ctl-a", "ctl-b")

	if err := f.mc.Client.DeleteInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	testsupport.EventuallyState(t, 90*time.Second, "the Node of the deleted instance deleted", func(ctx context.Context) (bool, string) {
		_, err := f.admin.CoreV1().Nodes().Get(ctx, "ctl-b", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get ctl-b: %v", err)
	})
	if _, err := f.admin.CoreV1().Nodes().Get(ctx, "ctl-a", metav1.GetOptions{}); err != nil {
		t.Errorf("ctl-a, whose instance runs: %v; want it kept", err)
	}
	reaches(t, vip, "ctl-a")
}

// transientCalls is how many calls to provider mc failed with a transient
// error so far (the manager runs in this process).
func transientCalls(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() != "stratus_cloud_requests_total" {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == "mc" && labels["outcome"] == "transient_error" {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// The plugin is killed with SIGKILL while a load balancer is being created,
// then nodes join, a Service is deleted and another created while it is
// down: no Node is deleted (all have been NotReady for an hour), nothing is
// initialized or provisioned from a dead plugin, and after it restarts
// everything converges: the new node initialized, the new Service served,
// the deleted Service's load balancer deleted (not leaked).
func TestPluginKilledDuringChurn(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	a, b := f.instanceAndNode("kill-a"), f.instanceAndNode("kill-b")
	f.initialized("kill-a", a, 90*time.Second)
	f.initialized("kill-b", b, 90*time.Second)

	// A load balancer is being created (minicloud provisions for 2s) when
	// the plugin dies.
	first := f.loadBalancerService("first", a, b)
	testsupport.EventuallyState(t, 60*time.Second, "minicloud creating the first load balancer", func(context.Context) (bool, string) {
		got := f.loadBalancers()
		return slices.Equal(got, []string{"first"}), fmt.Sprintf("load balancers %v", got)
	})
	f.plugin.kill()

	// Churn while it is down.
	c := f.instanceAndNode("kill-c")
	if err := f.admin.CoreV1().Services(f.ns).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.loadBalancerService("second", a, b, c)

	// Lifecycle passes run every second against the dead plugin; wait for
	// plenty of failed calls, checking all along that nothing happened.
	start := transientCalls(t)
	testsupport.EventuallyState(t, 90*time.Second, "calls failing transiently while the plugin is down", func(ctx context.Context) (bool, string) {
		for _, name := range []string{"kill-a", "kill-b", "kill-c"} {
			n, err := f.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("node %s while the plugin is down: %v; want it kept", name, err)
			}
			if name == "kill-c" && n.Spec.ProviderID != "" {
				t.Fatalf("node kill-c initialized while the plugin is down: %q", n.Spec.ProviderID)
			}
		}
		s, err := f.admin.CoreV1().Services(f.ns).Get(ctx, "second", metav1.GetOptions{})
		if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
			t.Fatalf("service second got an ingress while the plugin is down: %v", s.Status.LoadBalancer)
		}
		got := transientCalls(t) - start
		return got >= 20, fmt.Sprintf("%v transient failures", got)
	})
	if _, err := f.admin.CoreV1().Services(f.ns).Get(ctx, first.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("service first while the plugin is down: %v; want it kept by its finalizer until its load balancer is deleted", err)
	}

	f.plugin.start()
	f.initialized("kill-c", c, 90*time.Second)
	vip := f.ingress("second", 90*time.Second)
	reaches(t, vip, "kill-a", "kill-b", "kill-c")
	testsupport.EventuallyState(t, 90*time.Second, "only the second Service's load balancer left, the first Service gone", func(ctx context.Context) (bool, string) {
		got := f.loadBalancers()
		_, err := f.admin.CoreV1().Services(f.ns).Get(ctx, first.Name, metav1.GetOptions{})
		return slices.Equal(got, []string{"second"}) && apierrors.IsNotFound(err), fmt.Sprintf("load balancers %v, service first: %v", got, err)
	})
	for _, name := range []string{"kill-a", "kill-b", "kill-c"} {
		if _, err := f.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s after the plugin restarted: %v; want it kept", name, err)
		}
	}
}

// The vSphere provider as a plugin (against a simulated vCenter): nodes are
// initialized from its VMs, and the Node of a destroyed VM is deleted once
// the plugin's instance watch reports it, over the protocol's stream.
func TestVSpherePlugin(t *testing.T) {
	env := testenv.Get(t)
	admin, ns := env.Clientset(t), env.Namespace(t)
	ctx := context.Background()
	vc, err := vcsim.Start(ctx, vcsim.Options{VMs: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vc.Close)
	dir, err := os.MkdirTemp("", "plugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "vsphere.sock")
	cloudConfig := filepath.Join(dir, "vsphere.conf")
	if err := os.WriteFile(cloudConfig, vc.CloudConfig(vcsim.TrustCAFile), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := managertest.WriteKubeconfig(t, env.Config)
	startPlugin(t, "--provider=vsphere", "--cloud-config="+cloudConfig, "--socket="+socket, "--kubeconfig="+kubeconfig)
	config := fmt.Sprintf(`apiVersion: stratus.io/v1alpha1
kind: ManagerConfig
providers:
- name: vsphere
  type: plugin
  plugin: {address: "unix://%s"}
  instanceCacheFreshness: 1s
`, socket)
	configPath := filepath.Join(dir, "stratus.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	managertest.StartProcess(t, "--config="+configPath, "--cluster-name="+ns, "--kubeconfig="+kubeconfig,
		"--leader-elect-resource-namespace="+ns, "--node-monitor-period=1s", "--node-deletion-grace-period=1s",
		"--configure-cloud-routes=false", "--secure-port=0")

	names := vc.Nodes()
	hourAgo := metav1.NewTime(time.Now().Add(-time.Hour))
	for _, name := range names {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: uninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
		n, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletStopped", LastHeartbeatTime: hourAgo, LastTransitionTime: hourAgo}}
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	vms, err := vc.VMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		vm := vms[slices.IndexFunc(vms, func(v vcsim.VM) bool { return v.Name == name })]
		testsupport.EventuallyState(t, 90*time.Second, "node "+name+" initialized by the vSphere plugin", func(ctx context.Context) (bool, string) {
			n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ok := n.Spec.ProviderID == "vsphere://"+vm.UUID && n.Labels[corev1.LabelTopologyZone] == vm.Zone &&
				!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitialized })
			return ok, fmt.Sprintf("providerID %q, labels %v, taints %v", n.Spec.ProviderID, n.Labels, n.Spec.Taints)
		})
	}

	if err := vc.Destroy(ctx, names[1]); err != nil {
		t.Fatal(err)
	}
	testsupport.EventuallyState(t, 90*time.Second, "the destroyed VM's Node deleted", func(ctx context.Context) (bool, string) {
		_, err := admin.CoreV1().Nodes().Get(ctx, names[1], metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get %s: %v", names[1], err)
	})
	if _, err := admin.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{}); err != nil {
		t.Errorf("node %s, whose VM runs: %v; want it kept", names[0], err)
	}
}
