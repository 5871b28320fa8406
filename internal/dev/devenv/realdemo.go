package devenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/stratus-ccm/stratus/minicloud/client"
)

// realNodesMarker exists in the state dir while an environment with real
// nodes runs (the demo then runs real pods behind its Service).
const realNodesMarker = "real-nodes/running"

// markRealNodes writes the marker and returns its removal.
func markRealNodes(stateDir string) (func(), error) {
	path := filepath.Join(stateDir, realNodesMarker)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(path) }, nil
}

func realNodesRunning(stateDir string) bool {
	_, err := os.Stat(filepath.Join(stateDir, realNodesMarker))
	return err == nil
}

// demoApp is the demo's workload on real nodes: agnhost's netexec, which
// answers GET /hostname with its pod's name.
const demoApp = "stratus-demo"

// createDemoDeployment runs two agnhost pods, one per node where possible,
// that leave a NotReady node after 10 s instead of the default 5 minutes.
func (d *demo) createDemoDeployment(ctx context.Context) error {
	labels := map[string]string{"app": demoApp}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: demoApp},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "agnhost", Image: AgnhostImage, ImagePullPolicy: corev1.PullNever,
						Args:           []string{"netexec", "--http-port=8080"},
						Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
					}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Tolerations: []corev1.Toleration{
						{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)},
						{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)},
					},
				},
			},
		},
	}
	_, err := d.Kube.AppsV1().Deployments(dep.Namespace).Create(ctx, dep, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("create deployment %s: %w", demoApp, err)
	}
	d.say("created deployment %s/%s: 2 agnhost netexec pods (image %s, imported on every node)", dep.Namespace, demoApp, AgnhostImage)
	return nil
}

// readyPods returns the demo's ready pods by name, with their nodes.
func (d *demo) readyPods(ctx context.Context) (map[string]string, error) {
	pods, err := d.Kube.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=" + demoApp})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out[p.Name] = p.Spec.NodeName
			}
		}
	}
	return out, nil
}

// answers sends n requests for /hostname through ip and returns the pods
// that answered, with a count each.
func answers(ctx context.Context, ip string, n int) (map[string]int, error) {
	got := map[string]int{}
	for range n {
		body, err := GetBody(ctx, "http://"+ip+"/hostname")
		if err != nil {
			return got, err
		}
		got[body]++
	}
	return got, nil
}

// GetBody sends GET url on a new connection (a load balancer picks its
// backend per connection) and returns the body, which must come with 200.
func GetBody(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(body)), nil
}

// realTraffic is the demo's traffic on real nodes: the Service's address
// answered by pods on two nodes; then, with one pod and
// externalTrafficPolicy Local, only by the node that has it.
func (d *demo) realTraffic(ctx context.Context, svc *corev1.Service, ip string) error {
	d.begin("An HTTP request through that IP reaches agnhost pods on the real nodes (minicloud's VIP -> NodePort -> kube-proxy -> pod)")
	var seen map[string]int
	if err := d.waitFor(ctx, "answers from two pods", func(ctx context.Context) (bool, error) {
		pods, err := d.readyPods(ctx)
		if err != nil || len(pods) < 2 {
			return false, nil
		}
		got, err := answers(ctx, ip, 20)
		if err != nil || len(got) < 2 {
			return false, nil
		}
		seen = got
		return true, nil
	}); err != nil {
		return err
	}
	pods, _ := d.readyPods(ctx)
	for _, name := range sortedKeys(seen) {
		d.say("GET http://%s/hostname -> %s (on node %s) %d times of 20", ip, name, pods[name], seen[name])
	}

	d.begin("externalTrafficPolicy: Local with one pod: only its node passes the health check, every answer comes from it")
	if err := d.scaleDemo(ctx, 1); err != nil {
		return err
	}
	s, err := d.Kube.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if s, err = d.Kube.CoreV1().Services(svc.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set externalTrafficPolicy Local: %w", err)
	}
	d.say("service %s/%s: externalTrafficPolicy Local, healthCheckNodePort %d (served by kube-proxy on every node)", s.Namespace, s.Name, s.Spec.HealthCheckNodePort)
	var pod, node string
	if err := d.waitFor(ctx, "every answer from the one pod", func(ctx context.Context) (bool, error) {
		pods, err := d.readyPods(ctx)
		if err != nil || len(pods) != 1 {
			return false, nil
		}
		for p, n := range pods {
			pod, node = p, n
		}
		got, err := answers(ctx, ip, 20)
		return err == nil && len(got) == 1 && got[pod] == 20, nil
	}); err != nil {
		return err
	}
	d.say("20 of 20 answers from %s on node %s", pod, node)
	if lbs, err := d.Cloud.ListLoadBalancers(ctx, client.ListOptions{}); err == nil {
		for _, lb := range lbs {
			if lb.Tags["stratus/service-name"] != svc.Name || lb.HealthCheck == nil {
				continue
			}
			var states []string
			for _, th := range lb.TargetHealth {
				states = append(states, th.IP+" "+th.State)
			}
			d.say("minicloud probes HTTP :%d%s on each target: %s", lb.HealthCheck.Port, lb.HealthCheck.Path, strings.Join(states, ", "))
		}
	}
	return nil
}

func (d *demo) scaleDemo(ctx context.Context, replicas int32) error {
	sc, err := d.Kube.AppsV1().Deployments(metav1.NamespaceDefault).GetScale(ctx, demoApp, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("scale %s: %w", demoApp, err)
	}
	sc.Spec.Replicas = replicas
	if _, err := d.Kube.AppsV1().Deployments(metav1.NamespaceDefault).UpdateScale(ctx, demoApp, sc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale %s: %w", demoApp, err)
	}
	d.say("scaled deployment %s to %d", demoApp, replicas)
	return nil
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
