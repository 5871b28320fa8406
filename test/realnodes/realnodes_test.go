// Package realnodes tests stratus on real nodes: `stratus dev --real-nodes`
// with two nodes, each a network namespace with a real kubelet
// (--cloud-provider=external), containerd and kube-proxy, stratus-ccm
// installed from its Helm chart as pods on those nodes, agnhost pods behind a
// LoadBalancer Service, and pod traffic between the nodes carried only by
// the routes stratus creates in minicloud.
package realnodes

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"

	"github.com/stratus-ccm/stratus/internal/devenv"
	"github.com/stratus-ccm/stratus/internal/testenv"
	"github.com/stratus-ccm/stratus/internal/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// block is the environment's address block (127.253.0.0/16 for VIPs,
// 172.31.253.0/24 for nodes, 10.253.0.0/16 for pods), apart from the other
// tests' blocks.
const block = 253

// env is a running real-node environment.
type env struct {
	t        *testing.T
	stateDir string
	kube     kubernetes.Interface
	cloud    *client.Client
	out      *testsupport.LockedBuffer
}

// startEnv runs `stratus dev --real-nodes --nodes 2` in this process until
// the test ends, and checks that it leaves nothing of its own behind.
func startEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real kubelets, containerd and kube-proxy; skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("real nodes need root (network namespaces, cgroups, mounts); only -short skips this test")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	manager := filepath.Join(t.TempDir(), "stratus-ccm")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", manager, "./cmd/stratus-ccm")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build stratus-ccm: %v\n%s", err, msg)
	}
	e := &env{t: t, stateDir: t.TempDir(), out: &testsupport.LockedBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- devenv.Run(ctx, devenv.Options{
			StateDir: e.stateDir, Nodes: 2, AddressBlock: block, RealNodes: true,
			RepoRoot: root, KubeBinDir: bins, ManagerBinary: manager, Out: e.out,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stratus dev --real-nodes: %v", err)
		}
		if t.Failed() {
			t.Logf("stratus dev output:\n%s", e.out.String())
			dumpLogs(t, filepath.Join(e.stateDir, "logs"))
		}
		checkNothingLeft(t)
	})
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 10*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			done <- err
			return false, fmt.Errorf("stratus dev --real-nodes ended before ready: %v", err)
		default:
		}
		return strings.Contains(e.out.String(), devenv.ReadyLine), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := devenv.Connect(e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	e.kube, e.cloud = conn.Kube, conn.Cloud
	return e
}

// checkNothingLeft fails when the environment left a namespace, link or
// cgroup of its own.
func checkNothingLeft(t *testing.T) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Errorf("ip netns list: %v", err)
	}
	prefix := fmt.Sprintf("stratus-%d-", block)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, prefix) {
			t.Errorf("network namespace left behind: %s", line)
		}
	}
	if err := exec.Command("ip", "link", "show", fmt.Sprintf("sr%d", block)).Run(); err == nil {
		t.Errorf("host link sr%d left behind", block)
	}
	for _, h := range []string{"pids", "memory", "cpu", "cpuset", "unified"} {
		matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", h, prefix+"*"))
		for _, m := range matches {
			t.Errorf("cgroup left behind: %s", m)
		}
	}
}

// dumpLogs logs the tail of every component's log.
func dumpLogs(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("== %s (last %d lines)\n%s", e.Name(), len(lines), strings.Join(lines, "\n"))
	}
}

// poll waits for cond (a deadline long enough for a loaded 2-core machine;
// it bounds a hang, not a speed).
func (e *env) poll(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(e.t.Context(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		e.diagnose()
		e.t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
	}
}

// diagnose logs what the cloud's load balancers and the nodes' NodePorts
// and kube-proxy health answer, for a failure's report.
func (e *env) diagnose() {
	ctx := context.WithoutCancel(e.t.Context())
	lbs, err := e.cloud.ListLoadBalancers(ctx, client.ListOptions{})
	e.t.Logf("minicloud load balancers (%v):", err)
	for _, lb := range lbs {
		e.t.Logf("  %s %s %s listeners %+v health check %+v targets %+v", lb.ID, lb.VIP, lb.State, lb.Listeners, lb.HealthCheck, lb.TargetHealth)
		for _, th := range lb.TargetHealth {
			for _, l := range lb.Listeners {
				body, err := httpGet(ctx, fmt.Sprintf("http://%s:%d/hostname", th.IP, l.TargetPort))
				e.t.Logf("    NodePort %s:%d -> %q %v", th.IP, l.TargetPort, body, err)
			}
			body, err := httpGet(ctx, fmt.Sprintf("http://%s:10256/healthz", th.IP))
			e.t.Logf("    kube-proxy %s:10256/healthz -> %.80q %v", th.IP, body, err)
		}
	}
}

// TestRealNodes is the user's story on real nodes.
func TestRealNodes(t *testing.T) {
	e := startEnv(t)
	ctx := t.Context()

	// The kubelets registered with the uninitialized taint before any
	// manager ran; stratus, running as pods on those very nodes, takes it
	// away and fills in the cloud's data.
	e.poll("both nodes initialized by stratus", 5*time.Minute, func(ctx context.Context) (bool, error) {
		nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 2 {
			return false, fmt.Errorf("%d nodes: %v", len(nodes.Items), err)
		}
		for _, n := range nodes.Items {
			for _, taint := range n.Spec.Taints {
				if taint.Key == cloudproviderapi.TaintExternalCloudProvider {
					return false, fmt.Errorf("node %s still has %s", n.Name, taint.Key)
				}
			}
			if !strings.HasPrefix(n.Spec.ProviderID, "minicloud://") || n.Labels[corev1.LabelTopologyZone] == "" {
				return false, fmt.Errorf("node %s: providerID %q zone %q", n.Name, n.Spec.ProviderID, n.Labels[corev1.LabelTopologyZone])
			}
		}
		return true, nil
	})
	managers, err := e.kube.CoreV1().Pods(devenv.ChartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=stratus"})
	if err != nil {
		t.Fatal(err)
	}
	if len(managers.Items) != 2 {
		t.Fatalf("%d stratus-ccm pods from the chart, want 2", len(managers.Items))
	}
	for _, p := range managers.Items {
		if p.Spec.NodeName == "" || p.Spec.Containers[0].Image != devenv.ManagerImageRepository+":"+devenv.ManagerImageTag {
			t.Errorf("stratus pod %s: node %q image %q", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image)
		}
	}

	// agnhost netexec on both nodes behind a LoadBalancer Service.
	e.createDeployment(ctx, "web", 2)
	svc := e.createService(ctx, "web")
	vip := e.ingressIP(ctx, svc.Name)
	e.poll("the load balancer answers from pods on both nodes", 3*time.Minute, func(ctx context.Context) (bool, error) {
		seen := map[string]bool{}
		for range 20 {
			host, err := httpGet(ctx, "http://"+vip+"/hostname")
			if err != nil {
				return false, err
			}
			seen[host] = true
		}
		pods := e.podsOf(ctx, "web")
		if len(seen) != len(pods) || len(pods) != 2 {
			return false, fmt.Errorf("answers from %v; pods %v", seen, pods)
		}
		return true, nil
	})

	// Cross-node pod traffic flows through minicloud's routes, which
	// stratus created: deleting one breaks it, and stratus puts it back.
	pods := e.runningPods(ctx, "web")
	a, b := pods[0], pods[1]
	dial := fmt.Sprintf("http://%s:8080/dial?request=hostname&protocol=http&host=%s&port=8080&tries=1", a.Status.PodIP, b.Status.PodIP)
	e.poll("pod "+a.Name+" reaches pod "+b.Name+" on the other node", 2*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, dial)
		return err == nil && strings.Contains(body, b.Name), fmt.Errorf("%s: %v", body, err)
	})
	routes, err := e.cloud.ListRoutes(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeB, err := e.kube.CoreV1().Nodes().Get(ctx, b.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var routeB *api.Route
	for i := range routes {
		if routes[i].DestinationCIDR == nodeB.Spec.PodCIDR {
			routeB = &routes[i]
		}
	}
	if routeB == nil {
		t.Fatalf("no minicloud route for %s's pod CIDR %s among %v", nodeB.Name, nodeB.Spec.PodCIDR, routes)
	}
	if err := e.cloud.DeleteRoute(ctx, routeB.ID); err != nil {
		t.Fatal(err)
	}
	sawBroken := false
	e.poll("stratus re-creates the deleted route and traffic flows again", 2*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, dial)
		if err != nil || !strings.Contains(body, b.Name) {
			sawBroken = true
			return false, fmt.Errorf("%s: %v", body, err)
		}
		return sawBroken, fmt.Errorf("traffic still flows; the route's removal not seen yet")
	})

	// externalTrafficPolicy: Local with one pod: only its node passes the
	// health check on the Service's healthCheckNodePort (served by the
	// real kube-proxy), so every answer comes from that pod.
	e.scale(ctx, "web", 1)
	s, err := e.kube.CoreV1().Services("default").Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if _, err := e.kube.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.poll("with externalTrafficPolicy Local only the pod's node gets traffic", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods := e.runningPods(ctx, "web")
		if len(pods) != 1 {
			return false, fmt.Errorf("%d running pods", len(pods))
		}
		for range 20 {
			host, err := httpGet(ctx, "http://"+vip+"/hostname")
			if err != nil || host != pods[0].Name {
				return false, fmt.Errorf("answer %q (%v), want %s", host, err, pods[0].Name)
			}
		}
		return true, nil
	})
}

func (e *env) createDeployment(ctx context.Context, name string, replicas int32) {
	e.t.Helper()
	labels := map[string]string{"app": name}
	_, err := e.kube.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "agnhost", Image: devenv.AgnhostImage, ImagePullPolicy: corev1.PullNever,
						Args:           []string{"netexec", "--http-port=8080"},
						Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
					}},
					// One pod per node.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
						}},
					}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) scale(ctx context.Context, name string, replicas int32) {
	e.t.Helper()
	sc, err := e.kube.AppsV1().Deployments("default").GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	sc.Spec.Replicas = replicas
	if _, err := e.kube.AppsV1().Deployments("default").UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createService(ctx context.Context, name string) *corev1.Service {
	e.t.Helper()
	svc, err := e.kube.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return svc
}

func (e *env) ingressIP(ctx context.Context, name string) string {
	e.t.Helper()
	var ip string
	e.poll("Service "+name+" gets an ingress IP", 3*time.Minute, func(ctx context.Context) (bool, error) {
		s, err := e.kube.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return ip != "", nil
	})
	return ip
}

// runningPods returns the ready pods of app, by name.
func (e *env) runningPods(ctx context.Context, app string) []corev1.Pod {
	pods, err := e.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	return out
}

func (e *env) podsOf(ctx context.Context, app string) map[string]bool {
	out := map[string]bool{}
	for _, p := range e.runningPods(ctx, app) {
		out[p.Name] = true
	}
	return out
}

// httpGet returns the body of a GET with a short timeout.
func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	// A new connection per request: a load balancer picks its backend per
	// connection.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}
