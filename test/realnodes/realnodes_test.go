// Package realnodes tests stratus on real nodes: `stratus dev --real-nodes`
// with two nodes, each a network namespace with a real kubelet
// (--cloud-provider=external), containerd and kube-proxy, stratus-ccm
// installed from its Helm chart as pods on those nodes, agnhost pods behind a
// LoadBalancer Service, and pod traffic between the nodes carried only by
// the routes stratus creates in minicloud.
package realnodes

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/internal/dev/devenv/realnodestest"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/annotations"
)

// block is the environment's address block (127.190.0.0/16 for VIPs,
// 172.31.190.0/24 for nodes, 10.190.0.0/16 for pods), below the blocks
// stratus dev derives (200 to 247) and apart from the other tests' (248 to
// 254 for the dev environment's and the chaos runs' loopback pools).
const block = 190

// env is a running real-node environment.
type env struct {
	*realnodestest.Env
	t        *testing.T
	stateDir string
	kube     kubernetes.Interface
	cloud    *client.Client
}

// startEnv runs `stratus dev --real-nodes --nodes 2` until the test ends.
func startEnv(t *testing.T) *env {
	t.Helper()
	r := realnodestest.Start(t, realnodestest.Options{Block: block})
	return &env{Env: r, t: t, stateDir: r.StateDir, kube: r.Kube, cloud: r.Cloud}
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
	// Both replicas run, one per node (the chart's anti-affinity): the
	// second is scheduled once the scheduler sees the nodes ready.
	e.poll("the chart's two stratus-ccm pods running on two nodes", 3*time.Minute, func(ctx context.Context) (bool, error) {
		managers, err := e.kube.CoreV1().Pods(devenv.ChartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=stratus"})
		if err != nil {
			return false, err
		}
		nodes := map[string]bool{}
		for _, p := range managers.Items {
			if img := p.Spec.Containers[0].Image; img != devenv.ManagerImageRepository+":"+devenv.ManagerImageTag {
				return false, fmt.Errorf("stratus pod %s runs image %q", p.Name, img)
			}
			if p.Status.Phase == corev1.PodRunning {
				nodes[p.Spec.NodeName] = true
			}
		}
		return len(managers.Items) == 2 && len(nodes) == 2, fmt.Errorf("%d pods, running on %v", len(managers.Items), nodes)
	})

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
	// With no manager running, nothing puts a deleted route back: the
	// traffic stops for as long as the route is missing.
	e.scaleManager(ctx, 0)
	if err := e.cloud.DeleteRoute(ctx, routeB.ID); err != nil {
		t.Fatal(err)
	}
	e.poll("pod traffic across nodes broken while the route is missing", time.Minute, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, dial)
		if err == nil && strings.Contains(body, b.Name) {
			return false, fmt.Errorf("pod %s still reached pod %s", a.Name, b.Name)
		}
		return true, nil
	})
	e.scaleManager(ctx, 2)
	e.poll("stratus re-creates the deleted route and traffic flows again", 3*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, dial)
		return err == nil && strings.Contains(body, b.Name), fmt.Errorf("%s: %v", body, err)
	})
	routes, err = e.cloud.ListRoutes(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recreated := false
	for _, r := range routes {
		if r.DestinationCIDR == nodeB.Spec.PodCIDR && r.ID != routeB.ID {
			recreated = true
		}
	}
	if !recreated {
		t.Errorf("no new route for %s after %s was deleted: %v", nodeB.Spec.PodCIDR, routeB.ID, routes)
	}

	// A node whose kube-proxy stops answering its health port leaves the
	// Cluster-policy pool (clusterHealthCheck: kubeProxy), and the traffic
	// goes on through the other node.
	proxy := kubeProxyPid(t, e.stateDir, a.Spec.NodeName)
	if err := syscall.Kill(proxy, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	resume := func() {
		if stopped {
			_ = syscall.Kill(proxy, syscall.SIGCONT)
			stopped = false
		}
	}
	defer resume()
	nodeA, err := e.kube.CoreV1().Nodes().Get(ctx, a.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ipA := nodeA.Status.Addresses[0].Address
	e.poll("node "+nodeA.Name+" out of the pool while its kube-proxy is stopped", 2*time.Minute, func(ctx context.Context) (bool, error) {
		health, err := e.targetHealth(ctx, svc.Name)
		if err != nil {
			return false, err
		}
		if health[ipA] != api.HealthUnhealthy {
			return false, fmt.Errorf("target health %v", health)
		}
		for ip, h := range health {
			if ip != ipA && h != api.HealthHealthy {
				return false, fmt.Errorf("target health %v", health)
			}
		}
		return true, nil
	})
	for range 20 {
		if _, err := httpGet(ctx, "http://"+vip+"/hostname"); err != nil {
			t.Fatalf("with %s's kube-proxy stopped, the load balancer did not answer: %v", nodeA.Name, err)
		}
	}
	resume()
	e.poll("node "+nodeA.Name+" back in the pool", 2*time.Minute, func(ctx context.Context) (bool, error) {
		health, err := e.targetHealth(ctx, svc.Name)
		return err == nil && health[ipA] == api.HealthHealthy, fmt.Errorf("target health %v: %v", health, err)
	})

	// The PROXY protocol reaches a real pod: the load balancer's header
	// goes through the NodePort and kube-proxy to proxyecho, which answers
	// with the client address the header carries: this connection's.
	e.createProxyEcho(ctx)
	pvip := e.ingressIP(ctx, "proxyecho")
	ps, err := e.kube.CoreV1().Services("default").Get(ctx, "proxyecho", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := ps.Status.LoadBalancer.Ingress[0].IPMode; m == nil || *m != corev1.LoadBalancerIPModeProxy {
		t.Errorf("proxyecho's ingress ipMode = %v, want Proxy", m)
	}
	e.poll("proxyecho gets this connection's address in a PROXY header", 2*time.Minute, func(ctx context.Context) (bool, error) {
		local, reply, err := proxyEcho(ctx, pvip)
		if err != nil {
			return false, err
		}
		return reply == "client "+local, fmt.Errorf("reply %q, connection from %s", reply, local)
	})

	// The kustomize base, applied once in place of the chart: its manager
	// takes over, and tells the rest of the story.
	e.replaceChartWithKustomize(ctx)

	// The user's story, as `stratus dev demo` tells it: a new real node
	// joins and is initialized, a Service's address answered by pods on two
	// nodes, externalTrafficPolicy Local sending every request to the one
	// pod's node, the node's instance stopped (the shutdown taint) and
	// deleted (the Node removed).
	var demo testsupport.LockedBuffer
	if err := devenv.Demo(ctx, devenv.DemoOptions{StateDir: e.stateDir, Out: &demo, StepTimeout: 4 * time.Minute}); err != nil {
		t.Fatalf("stratus dev demo on real nodes: %v\n%s", err, demo.String())
	}
	t.Logf("stratus dev demo:\n%s", demo.String())
	for _, want := range []string{"[6/6]", "20 of 20 answers from", "Done:"} {
		if !strings.Contains(demo.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// kustomizeOverlay installs deploy/kustomize/base for the environment: the
// image imported on the nodes, the minicloud cloud-config the chart had,
// routes for the pod network, any node.
const kustomizeOverlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %[1]s
images:
  - name: ghcr.io/stratus-ccm/stratus-ccm
    newTag: %[2]s
secretGenerator:
  - name: stratus-cloud-config
    namespace: kube-system
    files:
      - cloud.conf
    options:
      disableNameSuffixHash: true
patches:
  - target:
      kind: Deployment
      name: stratus
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
      - op: remove
        path: /spec/template/spec/nodeSelector
      - op: replace
        path: /spec/template/spec/containers/0/resources/requests
        value: {cpu: 10m, memory: 64Mi}
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --cluster-name=stratus-dev
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --configure-cloud-routes=true
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --cluster-cidr=%[3]s
`

// replaceChartWithKustomize uninstalls the chart and applies the kustomize
// base through an overlay, then waits until a manager of the base leads.
func (e *env) replaceChartWithKustomize(ctx context.Context) {
	e.t.Helper()
	bins, err := testenv.BinDir()
	if err != nil {
		e.t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		e.t.Fatal(err)
	}
	kubeconfig := filepath.Join(e.stateDir, "kubeconfig")
	run := func(name string, args ...string) {
		out, err := exec.CommandContext(ctx, filepath.Join(bins, name), append(args, "--kubeconfig", kubeconfig)...).CombinedOutput()
		if err != nil {
			e.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	values, err := os.ReadFile(filepath.Join(e.stateDir, "real-nodes", "chart-values.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	var chart struct {
		ClusterCIDR string `json:"clusterCIDR"`
		CloudConfig struct {
			Content string `json:"content"`
		} `json:"cloudConfig"`
	}
	if err := json.Unmarshal(values, &chart); err != nil {
		e.t.Fatal(err)
	}
	lease, err := e.kube.CoordinationV1().Leases(devenv.ChartNamespace).Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		e.t.Fatalf("the chart's manager holds no lease: %v", err)
	}
	chartLeader := *lease.Spec.HolderIdentity
	run("helm", "uninstall", devenv.ChartRelease, "--namespace", devenv.ChartNamespace, "--wait")
	overlay := e.t.TempDir()
	// kustomize takes a base by a relative path only.
	base, err := filepath.Rel(overlay, filepath.Join(root, "deploy", "kustomize", "base"))
	if err != nil {
		e.t.Fatal(err)
	}
	kust := fmt.Sprintf(kustomizeOverlay, base, devenv.ManagerImageTag, chart.ClusterCIDR)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "cloud.conf"), []byte(chart.CloudConfig.Content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	run("kubectl", "apply", "-k", overlay)
	e.poll("a manager of the kustomize base leads", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.kube.CoreV1().Pods(devenv.ChartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=stratus"})
		if err != nil {
			return false, err
		}
		ready := map[string]bool{}
		for _, p := range pods.Items {
			if p.Labels["app.kubernetes.io/managed-by"] == "Helm" {
				return false, fmt.Errorf("pod %s of the chart still there", p.Name)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready[p.Name] = true
				}
			}
		}
		if len(ready) != 2 {
			return false, fmt.Errorf("ready pods of the base: %v", ready)
		}
		// The identity is <hostname>_<uuid> (the pods share the machine's
		// hostname on the host network): a new holder is a manager of the
		// base, the only candidates left.
		lease, err := e.kube.CoordinationV1().Leases(devenv.ChartNamespace).Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == chartLeader {
			return false, fmt.Errorf("lease still with the chart's manager %s (%v)", chartLeader, err)
		}
		return true, nil
	})
}

// scaleManager scales the chart's stratus-ccm Deployment.
func (e *env) scaleManager(ctx context.Context, replicas int32) {
	e.t.Helper()
	deps := e.kube.AppsV1().Deployments(devenv.ChartNamespace)
	sc, err := deps.GetScale(ctx, devenv.ChartRelease, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	sc.Spec.Replicas = replicas
	if _, err := deps.UpdateScale(ctx, devenv.ChartRelease, sc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if replicas != 0 {
		return
	}
	e.poll("no stratus-ccm pod left", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.kube.CoreV1().Pods(devenv.ChartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=stratus"})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, fmt.Errorf("%d pods", len(pods.Items))
	})
}

// createProxyEcho runs proxyecho behind a LoadBalancer Service with the
// PROXY protocol on.
func (e *env) createProxyEcho(ctx context.Context) {
	e.t.Helper()
	labels := map[string]string{"app": "proxyecho"}
	_, err := e.kube.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "proxyecho"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "proxyecho", Image: devenv.ProxyEchoImage, ImagePullPolicy: corev1.PullNever,
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = e.kube.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "proxyecho", Annotations: map[string]string{annotations.LBProxyProtocol.Name: "true"}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// proxyEcho connects to proxyecho through ip and returns the connection's
// local address and the reply.
func proxyEcho(ctx context.Context, ip string) (local, reply string, err error) {
	d := net.Dialer{Timeout: 3 * time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, "80"))
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return c.LocalAddr().String(), strings.TrimSpace(line), err
}

// kubeProxyPid finds the kube-proxy of a node of the environment by its
// configuration file.
func kubeProxyPid(t *testing.T, stateDir, node string) int {
	t.Helper()
	want := "--config=" + filepath.Join(stateDir, "real-nodes", "nodes", node, "kube-proxy.yaml")
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), want) {
			return pid
		}
	}
	t.Fatalf("no kube-proxy process with %s", want)
	return 0
}

// targetHealth returns the health of the Service's load balancer's
// targets, by address.
func (e *env) targetHealth(ctx context.Context, service string) (map[string]string, error) {
	lbs, err := e.cloud.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, lb := range lbs {
		if lb.Tags["stratus/service-name"] == service {
			out := map[string]string{}
			for _, th := range lb.TargetHealth {
				out[th.IP] = th.State
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("no load balancer for %s", service)
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

// httpGet returns the body of a GET on a new connection.
func httpGet(ctx context.Context, url string) (string, error) {
	return devenv.GetBody(ctx, url)
}
