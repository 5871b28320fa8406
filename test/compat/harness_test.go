package compat

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	_ "github.com/stratus-ccm/stratus/providers/minicloud" // registers "minicloud" in the stratus child process
	"github.com/stratus-ccm/stratus/vcsim"
)

func TestMain(m *testing.M) {
	managertest.RunHelperProcess()
	flag.Parse()
	// Scenarios mostly wait on the managers' periods, not on the CPU: run
	// four at a time unless -test.parallel says otherwise.
	if !flagSet("test.parallel") {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// side is one of the two managers under comparison.
type side string

// compareSides runs each side as a parallel subtest named after it (each
// has a control plane, cloud and manager of its own, and mostly waits for
// the manager's periods; -test.parallel bounds how many run at once), and,
// once all have ended and none failed, calls compare with what each returned,
// in the order of sides.
func compareSides(t *testing.T, sides []side, runSide func(t *testing.T, s side) any, compare func(got []any)) {
	t.Helper()
	got := make([]any, len(sides))
	// A test's cleanups run after its parallel subtests have ended.
	t.Cleanup(func() {
		if !t.Failed() {
			compare(got)
		}
	})
	for i, s := range sides {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			got[i] = runSide(t, s)
		})
	}
}

const (
	upstream side = "upstream"
	stratus  side = "stratus"
)

// clusterCIDR is the --cluster-cidr of route scenarios.
const clusterCIDR = "10.244.0.0/16"

// settleTimeout bounds each wait for a scenario's expected state.
const settleTimeout = 60 * time.Second

// run is one scenario on one manager: a fresh control plane and minicloud.
type run struct {
	t    *testing.T
	ctx  context.Context
	side side
	kube kubernetes.Interface
	// cloud is the minicloud of minicloud scenarios; vc the simulated
	// vCenter of vSphere scenarios (the other is nil).
	cloud *minicloudtest.Cloud
	vc    *vcsim.Server
	// settle bounds each wait.
	settle time.Duration
}

// ccmBinary is the upstream CCM hack/kubebins builds.
func ccmBinary(t *testing.T) string {
	t.Helper()
	dir, err := testenv.BinDir()
	if err != nil {
		t.Fatalf("find kubebins: %v", err)
	}
	bin := filepath.Join(dir, "ccm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("upstream CCM not found at %s: run `%s` first", bin, testenv.BuildCommand)
	}
	return bin
}

// startRun starts a control plane, a minicloud and the side's manager, all
// stopped when the (sub)test ends.
func startRun(t *testing.T, s side, sc scenario) *run {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane and the upstream CCM; skipped under -short")
	}
	bin := ""
	if s == upstream {
		bin = ccmBinary(t)
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	t.Cleanup(env.Stop)
	cloud := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &run{t: t, ctx: ctx, side: s, kube: env.Clientset(t), cloud: cloud, settle: settleTimeout}
	if sc.settle > 0 {
		r.settle = sc.settle
	}

	kubeconfig := managertest.WriteKubeconfig(t, env.Config)
	cloudConfig := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(cloudConfig, fmt.Appendf(nil, "url: %s\ntoken: %s\n", cloud.URL, cloud.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--cloud-provider=minicloud", "--cloud-config=" + cloudConfig,
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0",
		"--cluster-name=compat", "--node-monitor-period=1s", "--route-reconciliation-period=2s",
	}
	if sc.routes {
		args = append(args, "--configure-cloud-routes=true", "--cluster-cidr="+clusterCIDR)
	} else {
		args = append(args, "--configure-cloud-routes=false")
	}
	switch s {
	case upstream:
		startUpstream(t, bin, args)
	case stratus, stratusPlugin:
		// Deliberate difference node-deletion-guard: a grace period before a
		// gone instance's Node is deleted; short here so that the final states
		// can be compared.
		args = append(args, "--node-deletion-grace-period=2s")
		if s == stratusPlugin {
			args = throughPlugin(t, args, cloudConfig, kubeconfig)
		}
		managertest.StartProcess(t, args...)
	}
	return r
}

// startUpstream runs the upstream CCM until the test ends, with env
// ("KEY=value") added to the test's environment; its log is shown when the
// test fails.
func startUpstream(t *testing.T, bin string, args []string, env ...string) {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--v=2")...)
	cmd.Env = append(os.Environ(), env...)
	out := &testsupport.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start upstream CCM: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("upstream CCM output:\n%s", out.String())
		}
	})
}

// nodeOptions say how a simulated kubelet registers its Node.
type nodeOptions struct {
	// providedIP is the alpha.kubernetes.io/provided-node-ip annotation:
	// providedIPv4 (the instance's private IP), providedIPv6 (its private
	// IPv6), providedDualStack (both, IPv4 first) or a literal value.
	providedIP string
	// labels are set by the kubelet at registration.
	labels map[string]string
	// notReady registers the Node with Ready=False.
	notReady bool
	// podCIDR is spec.podCIDR (the route controller's input).
	podCIDR string
	// initialized registers without the uninitialized taint.
	initialized bool
}

// Symbolic values of nodeOptions.providedIP.
const (
	providedIPv4      = "instance"
	providedIPv6      = "instance-ipv6"
	providedDualStack = "instance-dual-stack"
)

// instance creates a minicloud instance.
func (r *run) instance(name string, public bool) *api.Instance {
	r.t.Helper()
	return r.createInstance(api.InstanceCreate{Name: name, PublicIP: public})
}

// createInstance creates the minicloud instance in, of type mc.small in zone
// mc-central-b unless in says otherwise.
func (r *run) createInstance(in api.InstanceCreate) *api.Instance {
	r.t.Helper()
	in.Type = cmp.Or(in.Type, "mc.small")
	in.Zone = cmp.Or(in.Zone, "mc-central-b")
	inst, err := r.cloud.Client.CreateInstance(r.ctx, in)
	if err != nil {
		r.t.Fatalf("create instance %s: %v", in.Name, err)
	}
	return inst
}

// join registers a Node for inst as kubelet --cloud-provider=external does.
func (r *run) join(inst *api.Instance, o nodeOptions) {
	r.t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: inst.Name, Labels: map[string]string{corev1.LabelHostname: inst.Name}, Annotations: map[string]string{}},
		Spec:       corev1.NodeSpec{PodCIDR: o.podCIDR},
	}
	for k, v := range o.labels {
		n.Labels[k] = v
	}
	if o.podCIDR != "" {
		n.Spec.PodCIDRs = []string{o.podCIDR}
	}
	switch o.providedIP {
	case "":
	case providedIPv4:
		n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = inst.PrivateIP
	case providedIPv6:
		n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = inst.PrivateIPv6
	case providedDualStack:
		n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = inst.PrivateIP + "," + inst.PrivateIPv6
	default:
		n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = o.providedIP
	}
	r.register(n, o)
}

// register creates the Node n as a kubelet does (with the uninitialized
// taint unless o.initialized, and whatever status n carries), then reports
// it Ready (or NotReady) with its hostname as its only address.
func (r *run) register(n *corev1.Node, o nodeOptions) {
	r.t.Helper()
	if !o.initialized {
		n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	_, err := r.kube.CoreV1().Nodes().Create(r.ctx, n, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatalf("create node %s: %v", n.Name, err)
	}
	ready := corev1.ConditionTrue
	if o.notReady {
		ready = corev1.ConditionFalse
	}
	// The manager may write the Node between create and status: retry on
	// conflicts as a kubelet does.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.kube.CoreV1().Nodes().Get(r.ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
		if len(cur.Status.Addresses) == 0 {
			cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}}
		}
		_, err = r.kube.CoreV1().Nodes().UpdateStatus(r.ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		r.t.Fatalf("node %s status: %v", n.Name, err)
	}
}

// waitFor polls cond until it holds, failing the test with what after
// the scenario's settle time.
func (r *run) waitFor(what string, cond func(ctx context.Context) (bool, error)) {
	r.t.Helper()
	testsupport.Eventually(r.t, r.settle, fmt.Sprintf("%s: %s", r.side, what), cond)
}

// nodeStays checks the Node for d and fails as soon as cond does not hold:
// the check that something does not happen.
func (r *run) nodeStays(name, what string, d time.Duration, cond func(*corev1.Node) bool) {
	r.t.Helper()
	testsupport.Consistently(r.t, d, fmt.Sprintf("%s: node %s: %s", r.side, name, what), func(context.Context) (bool, string) {
		n := r.node(name)
		return cond(n), fmt.Sprintf("taints %v, provider ID %q", n.Spec.Taints, n.Spec.ProviderID)
	})
}

// waitNode waits until cond holds for the Node.
func (r *run) waitNode(name, what string, cond func(*corev1.Node) bool) {
	r.t.Helper()
	r.waitFor("node "+name+" "+what, func(ctx context.Context) (bool, error) {
		n, err := r.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return cond(n), nil
	})
}

// waitService waits until cond holds for the Service default/name.
func (r *run) waitService(name, what string, cond func(*corev1.Service) bool) {
	r.t.Helper()
	r.waitFor("service "+name+" "+what, func(ctx context.Context) (bool, error) {
		s, err := r.kube.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return cond(s), nil
	})
}

// waitCloud waits until cond holds for minicloud's load balancers and routes.
func (r *run) waitCloud(what string, cond func([]api.LoadBalancer, []api.Route) bool) {
	r.t.Helper()
	r.waitFor("cloud "+what, func(ctx context.Context) (bool, error) {
		lbs, err := r.cloud.Client.ListLoadBalancers(ctx, listAll)
		if err != nil {
			return false, nil
		}
		routes, err := r.cloud.Client.ListRoutes(ctx, listAll)
		if err != nil {
			return false, nil
		}
		return cond(lbs, routes), nil
	})
}

// initialized is a waitNode condition: no uninitialized taint, a provider ID
// and more addresses than the kubelet's hostname.
func initialized(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return false
		}
	}
	return n.Spec.ProviderID != "" && len(n.Status.Addresses) > 1
}

// hasIngress is a waitService condition: the load balancer is published.
func hasIngress(s *corev1.Service) bool { return len(s.Status.LoadBalancer.Ingress) > 0 }

// failCloud makes every call of the given minicloud operations ("GET
// /v1/instances") fail with 500 until clearFaults. It returns the number of
// injected errors so far, for waitCloudErrors.
func (r *run) failCloud(ops ...string) int64 {
	r.t.Helper()
	st, err := r.cloud.Client.Stats(r.ctx)
	if err != nil {
		r.t.Fatalf("cloud stats: %v", err)
	}
	if _, err := r.cloud.Client.SetFaults(r.ctx, api.Faults{ErrorRate: 1, Operations: ops}); err != nil {
		r.t.Fatalf("inject faults into %v: %v", ops, err)
	}
	return st.Errors
}

// clearFaults makes the cloud answer normally again.
func (r *run) clearFaults() {
	r.t.Helper()
	if _, err := r.cloud.Client.SetFaults(r.ctx, api.Faults{}); err != nil {
		r.t.Fatalf("clear faults: %v", err)
	}
}

// waitCloudErrors waits until the manager has been answered n more injected
// errors than base: the positive signal that it has tried, and failed, to do
// what the faults block.
func (r *run) waitCloudErrors(base, n int64) {
	r.t.Helper()
	r.waitFor(fmt.Sprintf("%d injected cloud errors", n), func(ctx context.Context) (bool, error) {
		st, err := r.cloud.Client.Stats(ctx)
		return err == nil && st.Errors-base >= n, nil
	})
}

// node returns the Node name, failing the test when it does not exist.
func (r *run) node(name string) *corev1.Node {
	r.t.Helper()
	n, err := r.kube.CoreV1().Nodes().Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatalf("%s: get node %s: %v", r.side, name, err)
	}
	return n
}
