package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// Machine states the test drives.
const (
	running = "running"
	stopped = "stopped"
	gone    = "gone" // instance deleted by the test
)

// machine is one node: its minicloud instance and its simulated kubelet.
type machine struct {
	name, id, ip string
	// listenIP is where its kubelet's node ports listen when the machine's
	// own IP is not on loopback (a peer network's VM); systemUUID is what
	// its kubelet reports (vSphere finds VMs by it).
	listenIP, systemUUID string
	seq                  int
	state                string
	deletedAt            time.Time // when the test asked minicloud to delete the instance
	history              []string  // what the test did to it, with times, for the audit's messages
	cancel               context.CancelFunc
	done                 chan struct{}
}

// churnStats counts what the churn did.
type churnStats struct {
	populate                    time.Duration
	joined, left, stops, starts int
	created, changed, recreated int
	cloudRetries                int
}

// world is the cluster and cloud the test drives, and its record of every
// instance deletion, against which every Node deletion is checked.
type world struct {
	t    *testing.T
	cs   kubernetes.Interface
	cl   *client.Client
	ns   string
	rng  *rand.Rand
	c    *chaosCloud
	prov *provider
	ops  machineOps

	mu        sync.Mutex
	machines  map[string]*machine
	seq       int
	services  map[string]bool // names of Services that should exist
	pending   []string        // Services deleted, to be recreated under the same name
	svcSeq    int
	nodeDels  []nodeDeletion
	stats     churnStats
	kubeletWG sync.WaitGroup

	// annotations go on every Service the test creates.
	annotations map[string]string
	// ports, if set, answers every kubelet's NodePorts (servePorts).
	ports *devenv.NodePorts
}

// servePorts makes the kubelets answer their NodePorts through one
// devenv.NodePorts (one listener per port on every address) rather than
// each through a listener per port at its IP: the sockets then grow with
// the Services' ports, not with nodes × ports.
func (w *world) servePorts(ctx context.Context) {
	w.ports = &devenv.NodePorts{Client: w.cs}
	pctx, cancel := context.WithCancel(log.IntoContext(ctx, logr.Discard()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.ports.Run(pctx); err != nil {
			w.t.Errorf("node ports: %v", err)
		}
	}()
	w.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// nodeDeletion is a Node deletion the test observed (the test never deletes
// Nodes: every one is stratus's).
type nodeDeletion struct {
	name, id string
	at       time.Time
	// instanceDeletedFirst: the test had deleted the instance before.
	instanceDeletedFirst bool
}

func newWorld(t *testing.T, cs kubernetes.Interface, c *chaosCloud, p *provider, rng *rand.Rand) *world {
	w := &world{t: t, cs: cs, cl: c.cl, ns: c.ns, rng: rng, c: c, prov: p, ops: p.machines(c), machines: map[string]*machine{}, services: map[string]bool{}}
	t.Cleanup(func() {
		w.mu.Lock()
		for _, m := range w.machines {
			if m.cancel != nil {
				m.cancel()
			}
		}
		w.mu.Unlock()
		w.kubeletWG.Wait()
	})
	return w
}

// cloudCall retries fn while the cloud fails transiently (injected faults,
// the cloud down; machineOps.retryable says), for up to two minutes.
func (w *world) cloudCall(ctx context.Context, what string, fn func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		last = fn(ctx)
		if last == nil {
			return true, nil
		}
		if w.ops.retryable(last) {
			w.mu.Lock()
			w.stats.cloudRetries++
			w.mu.Unlock()
			return false, nil
		}
		return false, last
	})
	if err != nil {
		return fmt.Errorf("%s: %w (last: %v)", what, err, last)
	}
	return nil
}

// watchDeletions records every Node deletion with whether the test had
// deleted its instance first.
func (w *world) watchDeletions(ctx context.Context) {
	f := informers.NewSharedInformerFactory(w.cs, 0)
	inf := f.Core().V1().Nodes().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		d := nodeDeletion{name: n.Name, at: time.Now()}
		if m := w.machines[n.Name]; m != nil {
			d.id = m.id
			d.instanceDeletedFirst = m.state == gone && !m.deletedAt.After(d.at)
		}
		w.nodeDels = append(w.nodeDels, d)
	}})
	if err != nil {
		w.t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		w.t.Fatal("node informer did not sync")
	}
}

// violations are the Node deletions of instances the test had not deleted.
func (w *world) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, d := range w.nodeDels {
		if !d.instanceDeletedFirst {
			out = append(out, fmt.Sprintf("node %s (instance %s) deleted at %s while its instance existed", d.name, d.id, d.at.Format(time.RFC3339Nano)))
		}
	}
	return out
}

// populate creates the initial nodes and Services.
func (w *world) populate(ctx context.Context, nodes, services int) {
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := w.join(ctx); err != nil {
				w.t.Error(err)
			}
		}()
	}
	wg.Wait()
	for range services {
		if err := w.createService(ctx, w.nextServiceName()); err != nil {
			w.t.Fatal(err)
		}
	}
	w.mu.Lock()
	w.stats.populate = time.Since(start)
	w.stats.joined, w.stats.created = 0, 0 // count churn only
	w.mu.Unlock()
}

// churn applies one seeded random change every `every` until window is
// done, keeping the cluster around its size. Each change runs to its end
// on ctx: one cut short by the window's end would leave the test's record
// and the cluster apart (an instance recorded deleted that still runs), and
// the kubelets it starts must outlive the window.
func (w *world) churn(ctx, window context.Context, every time.Duration, nodes, services int) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-window.Done():
			return
		case <-tick.C:
		}
		w.recreatePending(ctx)
		if err := w.step(ctx, nodes, services); err != nil && ctx.Err() == nil {
			w.t.Errorf("churn: %v", err)
		}
	}
}

func (w *world) step(ctx context.Context, nodes, services int) error {
	w.mu.Lock()
	var runningNames, stoppedNames []string
	for name, m := range w.machines {
		switch m.state {
		case running:
			runningNames = append(runningNames, name)
		case stopped:
			stoppedNames = append(stoppedNames, name)
		}
	}
	var svcNames []string
	for name := range w.services {
		svcNames = append(svcNames, name)
	}
	w.mu.Unlock()
	sort.Strings(runningNames)
	sort.Strings(stoppedNames)
	sort.Strings(svcNames)
	live := len(runningNames) + len(stoppedNames)

	type action struct {
		weight int
		do     func() error
	}
	pick := func(names []string) string { return names[w.rng.IntN(len(names))] }
	actions := []action{
		{weightIf(live < nodes+nodes/5+1, 2), func() error { return w.join(ctx) }},
		{weightIf(live > nodes-nodes/5 && len(runningNames) > 1, 2), func() error { return w.leave(ctx, pick(runningNames)) }},
		{weightIf(len(runningNames) > 1 && len(stoppedNames) < nodes/5+1, 1), func() error { return w.stop(ctx, pick(runningNames)) }},
		{weightIf(len(stoppedNames) > 0, 2), func() error { return w.start(ctx, pick(stoppedNames)) }},
		{weightIf(len(svcNames) < services, 1), func() error { return w.createService(ctx, w.nextServiceName()) }},
		{weightIf(len(svcNames) > 0, 3), func() error { return w.changeService(ctx, pick(svcNames)) }},
		{weightIf(len(svcNames) > 0, 2), func() error { return w.deleteService(ctx, pick(svcNames)) }},
	}
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	if total == 0 {
		return nil
	}
	n := w.rng.IntN(total)
	for _, a := range actions {
		if n < a.weight {
			return a.do()
		}
		n -= a.weight
	}
	return nil
}

func weightIf(ok bool, weight int) int {
	if ok {
		return weight
	}
	return 0
}

// join creates an instance and runs its kubelet.
func (w *world) join(ctx context.Context) error {
	w.mu.Lock()
	w.seq++
	seq := w.seq
	w.mu.Unlock()
	name := fmt.Sprintf("chaos-%04d", seq)
	var info machineInfo
	err := w.cloudCall(ctx, "create machine "+name, func(ctx context.Context) error {
		var err error
		info, err = w.ops.create(ctx, name, seq)
		return err
	})
	if err != nil {
		return err
	}
	m := &machine{name: name, id: info.id, ip: info.ip, listenIP: info.listenIP, systemUUID: info.systemUUID, seq: seq, state: running}
	w.mu.Lock()
	w.machines[name] = m
	w.stats.joined++
	w.mu.Unlock()
	w.note(m, "joined")
	w.runKubelet(ctx, m)
	return nil
}

// runKubelet starts m's kubelet and gives its Node a pod CIDR once it is
// registered, as kube-controller-manager's node IPAM would.
func (w *world) runKubelet(ctx context.Context, m *machine) {
	// The kubelets' own retries (registering while the API server is
	// busy, heartbeats of a deleted Node) are not the test's subject.
	kctx, cancel := context.WithCancel(log.IntoContext(ctx, logr.Discard()))
	done := make(chan struct{})
	w.mu.Lock()
	m.cancel, m.done = cancel, done
	w.mu.Unlock()
	k := &devenv.Kubelet{Name: m.name, IP: m.ip, ListenIP: m.listenIP, SystemUUID: m.systemUUID, Client: w.cs, Ports: w.ports}
	w.kubeletWG.Add(1)
	go func() {
		defer w.kubeletWG.Done()
		defer close(done)
		_ = k.Run(kctx)
	}()
	cidr := fmt.Sprintf("10.%d.%d.0/24", m.seq/256, m.seq%256)
	patch := fmt.Appendf(nil, `{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, cidr, cidr)
	go func() {
		_ = wait.PollUntilContextTimeout(kctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			n, err := w.cs.CoreV1().Nodes().Get(ctx, m.name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if n.Spec.PodCIDR != "" {
				return true, nil
			}
			_, err = w.cs.CoreV1().Nodes().Patch(ctx, m.name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err == nil, nil
		})
	}()
}

// stopKubelet stops m's kubelet and marks its Node NotReady, as the node
// lifecycle controller of kube-controller-manager does once the heartbeats
// stop (the test runs none).
func (w *world) stopKubelet(ctx context.Context, m *machine) error {
	w.mu.Lock()
	cancel, done := m.cancel, m.done
	w.mu.Unlock()
	cancel()
	<-done
	w.note(m, "kubelet stopped")
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := w.cs.CoreV1().Nodes().Get(ctx, m.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			w.note(m, "no Node to mark NotReady")
			return nil
		}
		if err != nil {
			return err
		}
		now := metav1.Now()
		for i, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				n.Status.Conditions[i] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
					Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.", LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: now}
			}
		}
		_, err = w.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			w.note(m, "Node marked NotReady")
		}
		return err
	})
}

// leave stops the kubelet and deletes the instance: stratus must delete the Node.
func (w *world) leave(ctx context.Context, name string) error {
	m := w.machine(name)
	if err := w.stopKubelet(ctx, m); err != nil {
		return fmt.Errorf("node %s leaving: %w", name, err)
	}
	// Recorded before the call: the instance may be gone as soon as it is sent.
	w.mu.Lock()
	m.state, m.deletedAt = gone, time.Now()
	w.stats.left++
	w.mu.Unlock()
	w.note(m, "deleting instance")
	return w.cloudCall(ctx, "delete machine "+m.id, func(ctx context.Context) error { return w.ops.delete(ctx, m) })
}

// stop stops the instance and its kubelet: stratus must taint the Node, not delete it.
func (w *world) stop(ctx context.Context, name string) error {
	m := w.machine(name)
	if err := w.cloudCall(ctx, "stop machine "+m.id, func(ctx context.Context) error { return w.ops.stop(ctx, m) }); err != nil {
		return err
	}
	w.mu.Lock()
	m.state = stopped
	w.stats.stops++
	w.mu.Unlock()
	w.note(m, "instance stopped")
	return w.stopKubelet(ctx, m)
}

// start starts a stopped instance and its kubelet again.
func (w *world) start(ctx context.Context, name string) error {
	m := w.machine(name)
	if err := w.cloudCall(ctx, "start machine "+m.id, func(ctx context.Context) error { return w.ops.start(ctx, m) }); err != nil {
		return err
	}
	w.mu.Lock()
	m.state = running
	w.stats.starts++
	w.mu.Unlock()
	w.note(m, "instance started")
	w.runKubelet(ctx, m)
	return nil
}

// note records in m's history what the test did to it.
func (w *world) note(m *machine, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m.history = append(m.history, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (w *world) machine(name string) *machine {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.machines[name]
}

func (w *world) nextServiceName() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.svcSeq++
	return fmt.Sprintf("svc-%04d", w.svcSeq)
}

// sourceRangeChoices all admit the test's own connections (from 127.0.0.1).
var sourceRangeChoices = [][]string{nil, {"127.0.0.0/8"}, {"10.0.0.0/8", "127.0.0.1/32"}, {"127.0.0.0/16"}}

// randomSpec is a seeded random LoadBalancer Service spec: one or two TCP
// ports, either traffic policy, some source ranges.
func (w *world) randomSpec() corev1.ServiceSpec {
	w.mu.Lock()
	defer w.mu.Unlock()
	spec := corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "chaos"},
		LoadBalancerSourceRanges: sourceRangeChoices[w.rng.IntN(len(sourceRangeChoices))]}
	first := int32(80 + w.rng.IntN(20))
	spec.Ports = []corev1.ServicePort{{Name: "http", Port: first, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
	if w.rng.IntN(2) == 0 {
		spec.Ports = append(spec.Ports, corev1.ServicePort{Name: "alt", Port: first + 1000, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8081)})
	}
	spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if w.rng.IntN(3) == 0 {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return spec
}

func (w *world) createService(ctx context.Context, name string) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Annotations: w.annotations}, Spec: w.randomSpec()}
	_, err := w.cs.CoreV1().Services(w.ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service %s/%s: %w", w.ns, name, err)
	}
	w.mu.Lock()
	w.services[name] = true
	w.stats.created++
	w.mu.Unlock()
	return nil
}

// changeService changes the ports, the traffic policy or the source ranges.
func (w *world) changeService(ctx context.Context, name string) error {
	next := w.randomSpec()
	w.mu.Lock()
	what := w.rng.IntN(3)
	w.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := w.cs.CoreV1().Services(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch what {
		case 0:
			// New ports; the API server allocates their node ports.
			svc.Spec.Ports = next.Ports
		case 1:
			if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
				svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
				svc.Spec.HealthCheckNodePort = 0
			} else {
				svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			}
		default:
			svc.Spec.LoadBalancerSourceRanges = next.LoadBalancerSourceRanges
		}
		_, err = w.cs.CoreV1().Services(w.ns).Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("change service %s/%s: %w", w.ns, name, err)
	}
	w.mu.Lock()
	w.stats.changed++
	w.mu.Unlock()
	return nil
}

// deleteService deletes the Service; it is recreated under the same name as
// soon as the API server lets it (its finalizer holds it until stratus has
// deleted the load balancer).
func (w *world) deleteService(ctx context.Context, name string) error {
	err := w.cs.CoreV1().Services(w.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete service %s/%s: %w", w.ns, name, err)
	}
	w.mu.Lock()
	delete(w.services, name)
	w.pending = append(w.pending, name)
	w.mu.Unlock()
	return nil
}

// recreatePending creates the deleted Services whose old object is gone.
func (w *world) recreatePending(ctx context.Context) {
	w.mu.Lock()
	pending := slices.Clone(w.pending)
	w.mu.Unlock()
	for _, name := range pending {
		// Read first, from the API server's cache: a create while the
		// deleted Service still holds its finalizer fails, and each failed
		// create allocates and releases a ClusterIP (three writes), every
		// churn step for every pending name.
		_, err := w.cs.CoreV1().Services(w.ns).Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		if err == nil || (!apierrors.IsNotFound(err) && ctx.Err() != nil) {
			continue
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Annotations: w.annotations}, Spec: w.randomSpec()}
		_, err = w.cs.CoreV1().Services(w.ns).Create(ctx, svc, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) || (err != nil && ctx.Err() != nil) {
			continue
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				w.t.Errorf("recreate service %s/%s: %v", w.ns, name, err)
			}
			continue
		}
		w.mu.Lock()
		w.pending = slices.DeleteFunc(w.pending, func(n string) bool { return n == name })
		w.services[name] = true
		w.stats.recreated++
		w.mu.Unlock()
	}
}
