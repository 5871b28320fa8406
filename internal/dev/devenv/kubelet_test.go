package devenv

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
)

// devenvParallel is how many of the package's parallel tests run at once
// unless -test.parallel says otherwise: each end-to-end test runs an
// environment of its own (own address block, state dir and ports) and
// mostly waits for it, so more of them than the machine has cores.
const devenvParallel = 4

func TestMain(m *testing.M) {
	log.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(devenvParallel))
	}
	testenv.Main(m)
}

// testIP returns a loopback address unlikely to be used by another test run.
func testIP() string {
	return fmt.Sprintf("127.42.%d.%d", rand.IntN(250)+1, rand.IntN(250)+1)
}

func TestKubeletRegistersHeartbeatsAndServesNodePorts(t *testing.T) {
	t.Parallel() // own node names, IPs and namespace on the shared control plane
	env := testenv.Get(t)
	cs := env.Clientset(t)
	ns := env.Namespace(t)
	name := "kubelet-" + strconv.Itoa(rand.IntN(1e6))
	ip := testIP()
	t.Cleanup(func() {
		_ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	k := &Kubelet{Name: name, IP: ip, Client: cs}
	go func() { done <- k.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("kubelet Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)

	// Registered as a kubelet with --cloud-provider=external registers.
	var node *corev1.Node
	testsupport.Eventually(t, 30*time.Second, "node registered and Ready", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		return isReady(n), nil
	})
	if !hasTaint(node, cloudproviderapi.TaintExternalCloudProvider, corev1.TaintEffectNoSchedule) {
		t.Errorf("node taints = %v, want the uninitialized taint", node.Spec.Taints)
	}
	if got := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]; got != ip {
		t.Errorf("provided-node-ip annotation = %q, want %q", got, ip)
	}
	if !hasAddress(node, corev1.NodeHostName, name) || !hasAddress(node, corev1.NodeInternalIP, ip) {
		t.Errorf("addresses = %v, want hostname %s and internal IP %s", node.Status.Addresses, name, ip)
	}
	if node.Labels[corev1.LabelHostname] != name {
		t.Errorf("hostname label = %q", node.Labels[corev1.LabelHostname])
	}
	testsupport.Eventually(t, 30*time.Second, "node lease renewed", func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == name, nil
	})

	// Between status reports the Lease alone is the heartbeat, as a real
	// kubelet's: two renewals later the Node's Ready heartbeat is still the
	// one posted before the second.
	renewals := leaseRenewals(t, cs, name, 3)
	n, err := cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hb := readyHeartbeat(n); !hb.Before(renewals[1]) {
		t.Errorf("Ready heartbeat %s at renewal %s: the status was posted again with nothing changed (renewals %v)", hb, renewals[2], renewals)
	}

	// A LoadBalancer Service: its NodePort answers with the node and Service,
	// and its health check node port (ETP=Local) answers /healthz.
	svc, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodePort := svc.Spec.Ports[0].NodePort
	var reply Reply
	testsupport.Eventually(t, 30*time.Second, "node port answers", func(ctx context.Context) (bool, error) {
		body, code, err := httpGet(ctx, fmt.Sprintf("http://%s/", net.JoinHostPort(ip, strconv.Itoa(int(nodePort)))))
		if err != nil || code != http.StatusOK {
			return false, nil
		}
		return true, json.Unmarshal(body, &reply)
	})
	if want := (Reply{Node: name, Namespace: ns, Service: "web", Port: 80}); reply != want {
		t.Errorf("reply = %+v, want %+v", reply, want)
	}
	hcURL := fmt.Sprintf("http://%s/healthz", net.JoinHostPort(ip, strconv.Itoa(int(svc.Spec.HealthCheckNodePort))))
	testsupport.Eventually(t, 30*time.Second, "health check node port answers 200", func(ctx context.Context) (bool, error) {
		_, code, err := httpGet(ctx, hcURL)
		return err == nil && code == http.StatusOK, nil
	})

	// Deleting the Service closes its node port.
	if err := cs.CoreV1().Services(ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 30*time.Second, "node port closed after the Service is deleted", func(ctx context.Context) (bool, error) {
		_, _, err := httpGet(ctx, hcURL)
		return err != nil, nil
	})

	// A stopped machine stops heartbeating: the lease is no longer renewed.
	stop()
	l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := l.Spec.RenewTime.Time
	// Wait past one heartbeat period on a condition that must stay false: the
	// poll ends by timeout when no renewal happens.
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, HeartbeatPeriod+2*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(last), nil
	})
	if err == nil {
		t.Errorf("lease renewed after the kubelet stopped")
	}
}

func TestKubeletRestartKeepsNode(t *testing.T) {
	t.Parallel() // own node names, IPs and namespace on the shared control plane
	env := testenv.Get(t)
	cs := env.Clientset(t)
	name := "kubelet-" + strconv.Itoa(rand.IntN(1e6))
	t.Cleanup(func() {
		_ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// The node exists already (initialized by the cloud, no taint).
	pre := (&Kubelet{Name: name, IP: testIP()}).node()
	pre.Spec.Taints = nil
	pre.Spec.ProviderID = "minicloud://i-1"
	// Marked NotReady while the kubelet was down, as the node lifecycle
	// controller does: the restarted kubelet posts Ready again at once.
	for i, c := range pre.Status.Conditions {
		if c.Type == corev1.NodeReady {
			pre.Status.Conditions[i].Status = corev1.ConditionUnknown
		}
	}
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), pre, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- (&Kubelet{Name: name, IP: testIP(), Client: cs}).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testsupport.Eventually(t, 30*time.Second, "lease created by the restarted kubelet", func(ctx context.Context) (bool, error) {
		_, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	testsupport.Eventually(t, 30*time.Second, "restarted kubelet's node Ready again", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && isReady(n), nil
	})
	n, err := cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.ProviderID != "minicloud://i-1" || hasTaint(n, cloudproviderapi.TaintExternalCloudProvider, corev1.TaintEffectNoSchedule) {
		t.Errorf("restart changed the node: providerID %q taints %v", n.Spec.ProviderID, n.Spec.Taints)
	}
}

func httpGet(ctx context.Context, url string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

func hasAddress(n *corev1.Node, typ corev1.NodeAddressType, addr string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == typ && a.Address == addr {
			return true
		}
	}
	return false
}

// Kubelets sharing one NodePorts answer each at its own IP as its own
// node, through one listener per port; a stopped kubelet's IP stops
// answering while the others go on.
func TestKubeletsShareNodePorts(t *testing.T) {
	t.Parallel() // own node names, IPs and namespace on the shared control plane
	env := testenv.Get(t)
	cs := env.Clientset(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ports := &NodePorts{Client: cs}
	portsDone := make(chan error, 1)
	go func() { portsDone <- ports.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-portsDone; err != nil {
			t.Errorf("NodePorts Run: %v", err)
		}
	})

	type node struct {
		name, ip string
		cancel   context.CancelFunc
		done     chan error
	}
	var nodes []*node
	for i := range 2 {
		n := &node{name: fmt.Sprintf("shared-%d-%d", i, rand.IntN(1e6)), ip: testIP(), done: make(chan error, 1)}
		var kctx context.Context
		kctx, n.cancel = context.WithCancel(ctx)
		k := &Kubelet{Name: n.name, IP: n.ip, Client: cs, Ports: ports}
		go func() { n.done <- k.Run(kctx) }()
		nodes = append(nodes, n)
		t.Cleanup(func() {
			n.cancel()
			<-n.done
			_ = cs.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{})
		})
	}
	svc, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodePort := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	for _, n := range nodes {
		var reply Reply
		testsupport.Eventually(t, 30*time.Second, "node port of "+n.name+" answers", func(ctx context.Context) (bool, error) {
			body, code, err := httpGet(ctx, "http://"+net.JoinHostPort(n.ip, nodePort)+"/")
			if err != nil || code != http.StatusOK {
				return false, nil
			}
			return true, json.Unmarshal(body, &reply)
		})
		if want := (Reply{Node: n.name, Namespace: ns, Service: "shared", Port: 80}); reply != want {
			t.Errorf("reply at %s = %+v, want %+v", n.ip, reply, want)
		}
	}
	// An address no kubelet has is reset, not answered.
	if _, code, err := httpGet(t.Context(), "http://"+net.JoinHostPort(testIP(), nodePort)+"/"); err == nil {
		t.Errorf("an address of no node answered %d", code)
	}

	nodes[0].cancel()
	if err := <-nodes[0].done; err != nil {
		t.Errorf("kubelet Run: %v", err)
	}
	nodes[0].done <- nil // for the cleanup
	if _, code, err := httpGet(t.Context(), "http://"+net.JoinHostPort(nodes[0].ip, nodePort)+"/"); err == nil {
		t.Errorf("the stopped kubelet's node port answered %d", code)
	}
	if _, code, err := httpGet(t.Context(), "http://"+net.JoinHostPort(nodes[1].ip, nodePort)+"/"); err != nil || code != http.StatusOK {
		t.Errorf("the running kubelet's node port after the other stopped: %d, %v", code, err)
	}
}

// leaseRenewals waits for count distinct renew times of the node's Lease
// and returns them in order.
func leaseRenewals(t *testing.T, cs kubernetes.Interface, name string, count int) []time.Time {
	t.Helper()
	var seen []time.Time
	testsupport.Eventually(t, time.Duration(count+1)*HeartbeatPeriod+30*time.Second, fmt.Sprintf("%d lease renewals", count), func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, nil
		}
		if r := l.Spec.RenewTime.Time; len(seen) == 0 || r.After(seen[len(seen)-1]) {
			seen = append(seen, r)
		}
		return len(seen) >= count, nil
	})
	return seen
}

func readyHeartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}
