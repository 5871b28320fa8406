package devenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// The address blocks of the environments these tests start, one each: the
// tests run in parallel, and two environments in one block would bind the
// same VIPs (one's load balancer answering for the other's while its cloud
// is down). Above the blocks derived from a state dir.
const (
	blockClusterAndKubelets = lastDerivedBlock + 1 + iota
	blockEndToEnd
	blockVSphere
	blockOpenStack
	blockFaultDrills
)

// The end-to-end tests run `stratus dev` as a user would: the binary built
// from this tree, as a subprocess with a temporary state dir and free ports,
// and check the outcome through the API server, minicloud and real HTTP.

// builds are the commands buildCommand built, shared by the tests that run
// at the same time: they run the same binaries, and linking them again for
// each test would cost more CPU than most tests' own work. The folder is
// removed when the last test using it ends (a test that starts after that
// builds again).
var builds struct {
	mu    sync.Mutex
	dir   string
	users int
	paths map[string]string // command → binary
}

// buildCommand builds a command of this repository (e.g. "cmd/stratus"),
// or returns the binary a running test built.
func buildCommand(t *testing.T, root, cmd string) string {
	t.Helper()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "devenv-bin-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir, builds.paths = dir, map[string]string{}
	}
	builds.users++
	// Registered before the test starts anything that runs the binary, so
	// run after it is stopped.
	t.Cleanup(func() {
		builds.mu.Lock()
		defer builds.mu.Unlock()
		if builds.users--; builds.users == 0 {
			_ = os.RemoveAll(builds.dir)
			builds.dir, builds.paths = "", nil
		}
	})
	if path, ok := builds.paths[cmd]; ok {
		return path
	}
	// A folder per command: stratus dev looks for stratus-ccm next to
	// itself, and finds it only where a test puts it.
	path := filepath.Join(builds.dir, strings.ReplaceAll(cmd, "/", "_"), filepath.Base(cmd))
	c := exec.Command("go", "build", "-o", path, "./"+cmd)
	c.Dir = root
	if msg, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", cmd, err, msg)
	}
	builds.paths[cmd] = path
	return path
}

// devRun is a running `stratus dev` subprocess.
type devRun struct {
	t   *testing.T
	bin string // the stratus binary
	// stopSignal ends the run: os.Interrupt (Ctrl-C, the default) or SIGTERM.
	stopSignal os.Signal
	cmd        *exec.Cmd
	stateDir   string
	out        *testsupport.LockedBuffer
	exited     chan struct{}
	conn       *Conn
}

// startDev starts `stratus dev` with args and waits for its ready line.
func startDev(t *testing.T, stateDir string, args ...string) *devRun {
	t.Helper()
	if testing.Short() {
		t.Skip("runs stratus dev; skipped under -short")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bins, "kube-controller-manager")); err != nil {
		t.Fatalf("kube-controller-manager missing in %s: run hack/kubebins/build.sh (%v)", bins, err)
	}
	stratus := buildCommand(t, root, "cmd/stratus")
	d := &devRun{t: t, bin: stratus, stopSignal: os.Interrupt, stateDir: stateDir, out: &testsupport.LockedBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(stratus, append([]string{"dev", "--state-dir", stateDir, "--kube-bin-dir", bins}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("stratus dev output:\n%s", d.out.String())
			testsupport.DumpLogs(t, filepath.Join(stateDir, "logs"))
		}
	})
	// Room for a start on a machine busy with the other tests: the control
	// plane's, and without --manager-binary a go build of stratus-ccm (its
	// link alone has taken over two minutes there).
	deadline := time.NewTimer(6 * time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(d.out.String(), ReadyLine) {
		select {
		case <-d.exited:
			t.Fatalf("stratus dev exited before ready: %v", d.cmd.ProcessState)
		case <-deadline.C:
			t.Fatal("stratus dev not ready within 6m")
		case <-tick.C:
		}
	}
	if d.conn, err = Connect(stateDir); err != nil {
		t.Fatal(err)
	}
	return d
}

// stop sends stopSignal and checks that stratus dev exits cleanly and
// leaves none of the processes it started behind.
func (d *devRun) stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	children := testsupport.Descendants(d.cmd.Process.Pid)
	_ = d.cmd.Process.Signal(d.stopSignal)
	select {
	case <-d.exited:
	case <-time.After(90 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		d.t.Errorf("stratus dev did not exit within 90s of %v", d.stopSignal)
	}
	if !d.cmd.ProcessState.Success() {
		d.t.Errorf("stratus dev after %v: %v", d.stopSignal, d.cmd.ProcessState)
	}
	if len(children) == 0 {
		d.t.Errorf("stratus dev had no child processes (expected etcd, kube-apiserver, kube-controller-manager)")
	}
	for _, pid := range children {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			d.t.Errorf("process %d (%s) left running after %v", pid, testsupport.ProcName(pid), d.stopSignal)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (d *devRun) instance(ctx context.Context, name string) api.Instance {
	d.t.Helper()
	ins, err := d.conn.Cloud.ListInstances(ctx, client.ListOptions{Name: name})
	if err != nil || len(ins) != 1 {
		d.t.Fatalf("instance %s: %v (%d found)", name, err, len(ins))
	}
	return ins[0]
}

func (d *devRun) createLBService(ctx context.Context, name string) *corev1.Service {
	d.t.Helper()
	svc, err := d.conn.Kube.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	return svc
}

// TestDevClusterAndKubelets runs stratus dev without the manager: the
// cluster, the cloud and the kubelets, their lifecycle, Ctrl-C and restart.
func TestDevClusterAndKubelets(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	d := startDev(t, state, "--nodes", "2", "--no-manager", "--address-block", strconv.Itoa(blockClusterAndKubelets))
	ctx := t.Context()
	cs := d.conn.Kube

	for _, f := range []string{"kubeconfig", "env", "logs/etcd.log", "logs/kube-apiserver.log", "logs/kube-controller-manager.log", "manager.args"} {
		if _, err := os.Stat(filepath.Join(state, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	vars, err := readEnvFile(filepath.Join(state, EnvFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"KUBECONFIG", "MINICLOUD_URL", "MINICLOUD_TOKEN"} {
		if vars[k] == "" {
			t.Errorf("env file sets no %s", k)
		}
	}

	// Nodes registered as kubelets with --cloud-provider=external register,
	// Ready, and given pod CIDRs by kube-controller-manager's node IPAM.
	testsupport.Eventually(t, 60*time.Second, "2 nodes Ready with pod CIDRs", func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 2 {
			return false, nil
		}
		for _, n := range nodes.Items {
			if !isReady(&n) || n.Spec.PodCIDR == "" {
				return false, nil
			}
		}
		return true, nil
	})
	n1, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTaint(n1, cloudproviderapi.TaintExternalCloudProvider, corev1.TaintEffectNoSchedule) {
		t.Errorf("node-1 has no uninitialized taint without a manager: %v", n1.Spec.Taints)
	}

	// Each node answers the NodePort of a LoadBalancer Service on its
	// instance's private IP.
	svc := d.createLBService(ctx, "web")
	port := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	for _, name := range []string{"node-1", "node-2"} {
		ip := d.instance(ctx, name).PrivateIP
		testsupport.Eventually(t, 30*time.Second, name+" answers on its NodePort", func(ctx context.Context) (bool, error) {
			r, err := GetReply(ctx, "http://"+net.JoinHostPort(ip, port)+"/")
			return err == nil && r.Node == name && r.Service == "web", nil
		})
	}

	// An instance tagged stratus-dev=node joins the cluster.
	if _, err := d.conn.Cloud.CreateInstance(ctx, api.InstanceCreate{Name: "extra", Type: "mc.small", Zone: "mc-central-a", Tags: map[string]string{NodeTagKey: NodeTagValue}}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 30*time.Second, "node extra registered and Ready", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "extra", metav1.GetOptions{})
		return err == nil && isReady(n), nil
	})

	// A stopped instance stops heartbeating; kube-controller-manager marks
	// its node NotReady.
	if _, err := d.conn.Cloud.StopInstance(ctx, d.instance(ctx, "node-2").ID); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, NodeMonitorGracePeriod+40*time.Second, "node-2 NotReady", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		return err == nil && !isReady(n), nil
	})

	// Ctrl-C stops everything (checked by stop); a restart reuses the state
	// and is stopped with SIGTERM at the end of the test.
	d.stop()
	d2 := startDev(t, state, "--nodes", "2", "--no-manager")
	d2.stopSignal = syscall.SIGTERM
	nodes, err := d2.conn.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Errorf("after restart: %d nodes, want the 3 of before", len(nodes.Items))
	}
	if _, err := d2.conn.Kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("after restart: service web: %v", err)
	}
	if got := d2.instance(ctx, "node-2").State; got != api.InstanceStopped {
		t.Errorf("after restart: node-2's instance is %s, want it still stopped", got)
	}
}

// TestDevEndToEnd is the "done when": stratus dev with the manager
// initializes nodes, provisions a load balancer that answers, programs
// routes, taints a stopped instance's node and removes a deleted one's.
func TestDevEndToEnd(t *testing.T) {
	t.Parallel()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		t.Skip("runs stratus dev; skipped under -short")
	}
	// STRATUS_DEV_E2E_MANAGER runs another manager build (e.g. with an extra
	// provider compiled in); by default cmd/stratus-ccm of this tree.
	manager := os.Getenv("STRATUS_DEV_E2E_MANAGER")
	if manager == "" {
		manager = buildCommand(t, root, "cmd/stratus-ccm")
	}
	d := startDev(t, t.TempDir(), "--nodes", "2", "--manager-binary", manager, "--address-block", strconv.Itoa(blockEndToEnd))
	ctx := t.Context()
	cs := d.conn.Kube

	// Nodes initialized: provider ID, zone and type labels, no taint.
	testsupport.Eventually(t, 90*time.Second, "nodes initialized", func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 2 {
			return false, nil
		}
		for _, n := range nodes.Items {
			if !Initialized(&n) {
				return false, nil
			}
		}
		return true, nil
	})

	// A LoadBalancer Service gets an ingress IP that answers over HTTP.
	d.createLBService(ctx, "web")
	var ip string
	testsupport.Eventually(t, 90*time.Second, "ingress IP", func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ip = ingressOf(s)
		return ip != "", nil
	})
	testsupport.Eventually(t, 60*time.Second, "load balancer answers", func(ctx context.Context) (bool, error) {
		r, err := GetReply(ctx, "http://"+net.JoinHostPort(ip, "80")+"/")
		return err == nil && r.Service == "web" && strings.HasPrefix(r.Node, "node-"), nil
	})

	// Routes in minicloud for each node's pod CIDR.
	testsupport.Eventually(t, 60*time.Second, "a route per node pod CIDR", func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		routes, err := d.conn.Cloud.ListRoutes(ctx, client.ListOptions{})
		if err != nil {
			return false, nil
		}
		have := map[string]string{}
		for _, r := range routes {
			have[r.DestinationCIDR] = r.TargetInstanceID
		}
		for _, n := range nodes.Items {
			if n.Spec.PodCIDR == "" || have[n.Spec.PodCIDR] != d.instance(ctx, n.Name).ID {
				return false, nil
			}
		}
		return true, nil
	})

	// `stratus dev demo` walks through the story on an instance of its own,
	// meanwhile the test stops and deletes node-2's instance.
	demoOut := &testsupport.LockedBuffer{}
	demo := exec.CommandContext(ctx, d.bin, "dev", "demo", "--state-dir", d.stateDir)
	demo.Stdout, demo.Stderr = demoOut, demoOut
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	demoDone := make(chan error, 1)
	go func() { demoDone <- demo.Wait() }()

	// Stopping an instance taints its node; deleting it removes the node.
	in := d.instance(ctx, "node-2")
	if _, err := d.conn.Cloud.StopInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 2*time.Minute, "node-2 shutdown taint", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		return err == nil && hasTaint(n, cloudproviderapi.TaintNodeShutdown, corev1.TaintEffectNoSchedule), nil
	})
	if err := d.conn.Cloud.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 3*time.Minute, "node-2 deleted", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	select {
	case err := <-demoDone:
		if err != nil || !strings.Contains(demoOut.String(), "Done:") {
			t.Errorf("stratus dev demo: %v\n%s", err, demoOut.String())
		}
	case <-time.After(5 * time.Minute):
		t.Errorf("stratus dev demo did not finish within 5m:\n%s", demoOut.String())
	}
	// The demo cleaned up: its Service is gone, its instance and node too.
	testsupport.Eventually(t, 60*time.Second, "demo service removed", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Services("default").Get(ctx, "stratus-demo", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "node-1" {
		t.Errorf("nodes after the demo and node-2's deletion: %d, want only node-1", len(nodes.Items))
	}
	// Ctrl-C leaves nothing running: checked by stop in the cleanup.
}

// pids returns the processes below stratus dev whose command is name.
func (d *devRun) pids(name string) []int {
	var out []int
	for _, pid := range testsupport.Descendants(d.cmd.Process.Pid) {
		if testsupport.ProcName(pid) == name {
			out = append(out, pid)
		}
	}
	return out
}

// newPid waits for a process name below stratus dev other than old.
func (d *devRun) newPid(name string, old int) int {
	d.t.Helper()
	var pid int
	testsupport.Eventually(d.t, 60*time.Second, fmt.Sprintf("a %s other than pid %d", name, old), func(context.Context) (bool, error) {
		for _, p := range d.pids(name) {
			if p != old {
				pid = p
				return true, nil
			}
		}
		return false, nil
	})
	return pid
}

// waitOutput waits until stratus dev has printed s.
func (d *devRun) waitOutput(timeout time.Duration, s string) {
	d.t.Helper()
	testsupport.Eventually(d.t, timeout, fmt.Sprintf("stratus dev printing %q", s), func(context.Context) (bool, error) {
		return strings.Contains(d.out.String(), s), nil
	})
}

// minicloud runs `stratus dev minicloud <action>` and returns its output.
func (d *devRun) minicloud(ctx context.Context, action string) (string, error) {
	out, err := exec.CommandContext(ctx, d.bin, "dev", "minicloud", action, "--state-dir", d.stateDir).CombinedOutput()
	return string(out), err
}

// waitLB waits for the Service's LoadBalancerReady condition to have reason
// and returns the Service.
func (d *devRun) waitLB(timeout time.Duration, name, reason string) *corev1.Service {
	d.t.Helper()
	var svc *corev1.Service
	testsupport.Eventually(d.t, timeout, fmt.Sprintf("service %s LoadBalancerReady reason %s", name, reason), func(ctx context.Context) (bool, error) {
		s, err := d.conn.Kube.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		svc = s
		for _, c := range s.Status.Conditions {
			if c.Type == "LoadBalancerReady" && c.Reason == reason {
				return reason != "Ready" || ingressOf(s) != "", nil
			}
		}
		return false, nil
	})
	return svc
}

// TestDevFaultDrills rehearses the two drills of docs/dev.md: the manager
// is killed (twice, so the restart backs off) and comes back on its own;
// minicloud is stopped, a Service created meanwhile goes CloudError, and
// once minicloud is started again it gets its load balancer, while what
// existed before the outage (instances, load balancers and their traffic)
// is still there.
func TestDevFaultDrills(t *testing.T) {
	t.Parallel()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		t.Skip("runs stratus dev; skipped under -short")
	}
	manager := buildCommand(t, root, "cmd/stratus-ccm")
	d := startDev(t, t.TempDir(), "--nodes", "1", "--manager-binary", manager, "--address-block", strconv.Itoa(blockFaultDrills))
	ctx := t.Context()
	const mgrName = "stratus-ccm"

	d.createLBService(ctx, "web")
	webIP := ingressOf(d.waitLB(90*time.Second, "web", "Ready"))

	// Kill the manager twice in a row: each exit is narrated with its
	// status and the manager started again, the second time after twice
	// the delay.
	pids := d.pids(mgrName)
	if len(pids) != 1 {
		t.Fatalf("%d %s processes below stratus dev, want 1", len(pids), mgrName)
	}
	first := pids[0]
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitOutput(30*time.Second, fmt.Sprintf("stratus-ccm (pid %d) exited: signal: killed; restarting it in 1s", first))
	second := d.newPid(mgrName, first)
	d.waitOutput(10*time.Second, fmt.Sprintf("stratus-ccm restarted (pid %d)", second))
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitOutput(30*time.Second, fmt.Sprintf("stratus-ccm (pid %d) exited: signal: killed; restarting it in 2s", second))
	d.newPid(mgrName, second)
	// The environment runs on and the restarted manager does its job.
	d.createLBService(ctx, "after-crash")
	d.waitLB(90*time.Second, "after-crash", "Ready")

	// A minicloud outage.
	before := d.instance(ctx, "node-1")
	// A minicloud environment has no vCenter to stop.
	if out, err := exec.CommandContext(ctx, d.bin, "dev", "vcsim", "stop", "--state-dir", d.stateDir).CombinedOutput(); err == nil || !strings.Contains(string(out), "--cloud vsphere") {
		t.Errorf("stratus dev vcsim stop on a minicloud environment: %v: %s", err, out)
	}
	if out, err := d.minicloud(ctx, "stop"); err != nil || !strings.Contains(out, "minicloud stopped") {
		t.Fatalf("stratus dev minicloud stop: %v: %s", err, out)
	}
	if _, err := d.conn.Cloud.ListInstances(ctx, client.ListOptions{}); err == nil {
		t.Fatal("minicloud answers after stratus dev minicloud stop")
	}
	if out, err := d.minicloud(ctx, "status"); err != nil || !strings.Contains(out, "minicloud stopped") {
		t.Errorf("stratus dev minicloud status while stopped: %v: %s", err, out)
	}
	if out, err := d.minicloud(ctx, "stop"); err == nil || !strings.Contains(out, "not running") {
		t.Errorf("second stop: %v: %s, want an error saying minicloud is not running", err, out)
	}
	d.createLBService(ctx, "outage")
	d.waitLB(90*time.Second, "outage", "CloudError")
	d.waitOutput(10*time.Second, "service default/outage: LoadBalancerReady=False (CloudError)")

	// Recovery: minicloud comes back with its state, and the Service that
	// failed meanwhile gets its load balancer.
	if out, err := d.minicloud(ctx, "start"); err != nil || !strings.Contains(out, "minicloud started") {
		t.Fatalf("stratus dev minicloud start: %v: %s", err, out)
	}
	if after := d.instance(ctx, "node-1"); after.ID != before.ID || after.PrivateIP != before.PrivateIP {
		t.Errorf("node-1's instance after the restart: %s %s, want %s %s", after.ID, after.PrivateIP, before.ID, before.PrivateIP)
	}
	d.waitLB(3*time.Minute, "outage", "Ready")
	d.waitOutput(10*time.Second, "service default/outage: LoadBalancerReady=True (Ready)")
	lbs, err := d.conn.Cloud.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) != 3 {
		t.Errorf("%d load balancers after the outage, want 3 (web, after-crash, outage)", len(lbs))
	}
	testsupport.Eventually(t, 60*time.Second, "web's load balancer answers again", func(ctx context.Context) (bool, error) {
		r, err := GetReply(ctx, "http://"+net.JoinHostPort(webIP, "80")+"/")
		return err == nil && r.Service == "web" && r.Node == "node-1", nil
	})
	if out, err := d.minicloud(ctx, "start"); err == nil || !strings.Contains(out, "already running") {
		t.Errorf("second start: %v: %s, want an error saying minicloud is already running", err, out)
	}
}
