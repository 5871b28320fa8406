package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// RealNodesOptions configure RunRealNodes.
type RealNodesOptions struct {
	// Managers to measure, in order (RealNodesStratus, RealNodesUpstream).
	Managers []string
	// Services is how many LoadBalancer Services each manager gets (default
	// 50), created at Rate per second (default 5).
	Services int
	Rate     float64
	// Nodes is how many real nodes run before one is added (default 2).
	Nodes int
	// Block is the environments' address block (one at a time).
	Block int
	// WorkDir keeps each manager's state dir and logs (<WorkDir>/<manager>).
	WorkDir string
	// RepoRoot, KubeBinDir (with ccm, the upstream CCM) and StratusCCM
	// (installed from the chart as the image's binary).
	RepoRoot, KubeBinDir, StratusCCM string
	// Commit is written in the report.
	Commit string
	// PhaseTimeout bounds each phase (default 15m).
	PhaseTimeout time.Duration
	// Progress, if set, gets the report after each manager's run.
	Progress func(*RealNodesReport)
}

func (o *RealNodesOptions) defaults() error {
	if len(o.Managers) == 0 {
		o.Managers = []string{RealNodesStratus, RealNodesUpstream}
	}
	for _, m := range o.Managers {
		if m != RealNodesStratus && m != RealNodesUpstream {
			return fmt.Errorf("manager %q: want %s or %s", m, RealNodesStratus, RealNodesUpstream)
		}
	}
	if o.Services == 0 {
		o.Services = 50
	}
	if o.Rate == 0 {
		o.Rate = 5
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.PhaseTimeout == 0 {
		o.PhaseTimeout = 15 * time.Minute
	}
	if o.Services < 1 || o.Rate <= 0 || o.Nodes < 1 {
		return fmt.Errorf("services %d, rate %g, nodes %d: want positive values", o.Services, o.Rate, o.Nodes)
	}
	if o.Block < 1 || o.Block > 254 {
		return fmt.Errorf("address block %d: want 1..254", o.Block)
	}
	return nil
}

// RunRealNodes measures each manager on real nodes of its own, one after
// the other on the same address block: Service creation latency to a pod's
// answer through the ingress, and node-sync latency per load balancer when
// a node is added and when one is removed.
func RunRealNodes(ctx context.Context, o RealNodesOptions) (*RealNodesReport, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("real nodes need root (network namespaces, cgroups, mounts)")
	}
	start := time.Now()
	rep := &RealNodesReport{
		Date:     start.UTC(),
		Commit:   o.Commit,
		Machine:  Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()},
		Services: o.Services, Rate: o.Rate, Nodes: o.Nodes,
	}
	for _, m := range o.Managers {
		res := runRealNodesManager(ctx, o, m)
		rep.Managers = append(rep.Managers, res)
		rep.Duration = Seconds(time.Since(start).Seconds())
		if o.Progress != nil {
			o.Progress(rep)
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep.Duration = Seconds(time.Since(start).Seconds())
	return rep, nil
}

// runRealNodesManager runs one manager's environment and measurements;
// a failure is recorded in the result with what was measured until then.
func runRealNodesManager(ctx context.Context, o RealNodesOptions, manager string) (res RealNodesManager) {
	logger := log.FromContext(ctx).WithValues("manager", manager)
	start := time.Now()
	res.Name = manager
	defer func() { res.Duration = Seconds(time.Since(start).Seconds()) }()
	fail := func(err error) RealNodesManager {
		logger.Info("stopped early", "error", err.Error())
		res.Error = err.Error()
		return res
	}
	dir := filepath.Join(o.WorkDir, manager)
	if err := os.RemoveAll(dir); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	stateDir := filepath.Join(dir, "state")
	devLog, err := os.Create(filepath.Join(dir, "dev.log"))
	if err != nil {
		return fail(err)
	}
	defer devLog.Close()

	envCtx, stopEnv := context.WithCancel(context.WithoutCancel(ctx))
	ready := &lineWatch{want: devenv.ReadyLine, seen: make(chan struct{})}
	done := make(chan error, 1)
	logger.Info("starting stratus dev --real-nodes", "stateDir", stateDir, "block", o.Block)
	go func() {
		done <- devenv.Run(envCtx, devenv.Options{
			StateDir: stateDir, Nodes: o.Nodes, AddressBlock: o.Block, RealNodes: true,
			NoManager: manager == RealNodesUpstream, RepoRoot: o.RepoRoot, KubeBinDir: o.KubeBinDir,
			ManagerBinary: o.StratusCCM, Out: io.MultiWriter(devLog, ready),
		})
	}()
	defer func() {
		stopEnv()
		if err := <-done; err != nil && res.Error == "" {
			res.Error = "stratus dev: " + err.Error()
		}
		logger.Info("environment stopped")
	}()
	select {
	case <-ready.seen:
	case err := <-done:
		done <- err
		return fail(fmt.Errorf("stratus dev --real-nodes ended before ready: %v (see %s)", err, devLog.Name()))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	conn, err := devenv.Connect(stateDir)
	if err != nil {
		return fail(err)
	}
	if manager == RealNodesUpstream {
		stop, err := startUpstreamCCM(o.KubeBinDir, stateDir, filepath.Join(dir, "ccm.log"))
		if err != nil {
			return fail(err)
		}
		defer stop()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir, "kubeconfig"))
	if err != nil {
		return fail(err)
	}
	// The harness's own requests must not wait behind client-side
	// throttling: that would shift its timestamps.
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fail(err)
	}
	b := &realBench{o: o, kube: kube, cloud: conn.Cloud, log: logger}
	if err := b.phase(ctx, "nodes initialized and Ready", func(ctx context.Context) error { return b.waitNodes(ctx, o.Nodes) }); err != nil {
		return fail(err)
	}
	if err := b.phase(ctx, "agnhost pods ready", b.createBackends); err != nil {
		return fail(err)
	}
	res.LoadBefore = loadAvg()
	defer func() { res.LoadAfter = loadAvg() }()
	if err := b.phase(ctx, "services answering", func(ctx context.Context) error {
		var err error
		res.Creation, res.Ingress, err = b.createServices(ctx)
		return err
	}); err != nil {
		return fail(err)
	}
	if err := b.phase(ctx, "node added to every load balancer", func(ctx context.Context) error {
		var err error
		res.NodeAdd, res.NodeAddReady, res.NodeJoin, err = b.addNode(ctx)
		return err
	}); err != nil {
		return fail(err)
	}
	if err := b.phase(ctx, "node removed from every load balancer", func(ctx context.Context) error {
		var err error
		res.NodeRemove, err = b.removeNode(ctx)
		return err
	}); err != nil {
		return fail(err)
	}
	return res
}

// lineWatch closes seen once want was written.
type lineWatch struct {
	want string
	mu   sync.Mutex
	buf  []byte
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if strings.Contains(string(w.buf), w.want) {
		w.once.Do(func() { close(w.seen) })
		w.buf = nil
	} else if i := strings.LastIndexByte(string(w.buf), '\n'); i >= 0 {
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// startUpstreamCCM runs hack/kubebins' ccm with the flags of manager.args
// (UpstreamCCMArgs) and returns its stop.
func startUpstreamCCM(binDir, stateDir, logPath string) (func(), error) {
	raw, err := os.ReadFile(filepath.Join(stateDir, "manager.args"))
	if err != nil {
		return nil, err
	}
	cloudConfig := filepath.Join(stateDir, "upstream-cloud.yaml")
	args, orig, err := UpstreamCCMArgs(string(raw), cloudConfig)
	if err != nil {
		return nil, err
	}
	cc, err := os.ReadFile(orig)
	if err != nil {
		return nil, err
	}
	if len(cc) > 0 && cc[len(cc)-1] != '\n' {
		cc = append(cc, '\n')
	}
	if err := os.WriteFile(cloudConfig, append(cc, "clusterHealthCheck: kubeProxy\n"...), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(binDir, "ccm"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start the upstream CCM: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
	}, nil
}

// loadAvg is the machine's load average now (zeros when unreadable).
func loadAvg() [3]float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return [3]float64{}
	}
	l, _ := ParseLoadAvg(string(raw))
	return l
}

// realBench measures one manager on its running environment.
type realBench struct {
	o     RealNodesOptions
	kube  kubernetes.Interface
	cloud *client.Client
	log   logr.Logger
	// services are the benchmark's Services' UIDs, by name.
	mu       sync.Mutex
	services map[string]string
	// node is the added node's name, IP and instance.
	node, nodeIP, instance string
}

const (
	realNS      = "bench-realnodes"
	realApp     = "bench-agnhost"
	realPoll    = 200 * time.Millisecond
	addedPrefix = "bench-added-"
)

func (b *realBench) phase(ctx context.Context, what string, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.PhaseTimeout)
	defer cancel()
	start := time.Now()
	b.log.Info("phase", "waiting for", what)
	if err := f(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	b.log.Info("phase done", "what", what, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// waitNodes waits for n nodes, every one initialized and Ready.
func (b *realBench) waitNodes(ctx context.Context, n int) error {
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		nodes, err := b.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ok := 0
		for i := range nodes.Items {
			if devenv.Initialized(&nodes.Items[i]) && nodeReady(&nodes.Items[i]) {
				ok++
			}
		}
		return ok >= n, nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// createBackends runs agnhost netexec, one pod per node, behind every
// Service of the benchmark.
func (b *realBench) createBackends(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: realNS}}
	if _, err := b.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := map[string]string{"app": realApp}
	replicas := int32(b.o.Nodes)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: realNS, Name: realApp},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
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
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
				},
			},
		},
	}
	if _, err := b.kube.AppsV1().Deployments(realNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := b.kube.AppsV1().Deployments(realNS).Get(ctx, realApp, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas >= replicas, nil
	})
}

// prober sends GET /hostname on a new connection each time.
var prober = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func answered(ctx context.Context, ip string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+"/hostname", nil)
	if err != nil {
		return false
	}
	resp, err := prober.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	return err == nil && resp.StatusCode == http.StatusOK && strings.HasPrefix(strings.TrimSpace(string(body)), realApp)
}

// createServices creates the Services at the stated rate and measures each
// one's creation → ingress IP and creation → a pod's answer through it.
func (b *realBench) createServices(ctx context.Context) (creation, ingress Latencies, err error) {
	n := b.o.Services
	b.services = map[string]string{}
	type sample struct{ ingress, answer float64 }
	results := make([]sample, n)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / b.o.Rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// One lister reads every Service's ingress (a GET per Service and
	// poll would queue behind the client's rate limit and delay the
	// creations themselves).
	ips := &ingressMap{ips: map[string]string{}}
	listCtx, stopList := context.WithCancel(ctx)
	defer stopList()
	go func() {
		_ = wait.PollUntilContextCancel(listCtx, realPoll, true, func(ctx context.Context) (bool, error) {
			list, err := b.kube.CoreV1().Services(realNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, s := range list.Items {
				if len(s.Status.LoadBalancer.Ingress) > 0 && s.Status.LoadBalancer.Ingress[0].IP != "" {
					ips.set(s.Name, s.Status.LoadBalancer.Ingress[0].IP)
				}
			}
			return false, nil
		})
	}()
	var createErr error
	for i := range n {
		if i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return creation, ingress, ctx.Err()
			}
		}
		name := fmt.Sprintf("lb-%03d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: realNS, Name: name},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeLoadBalancer,
				Selector: map[string]string{"app": realApp},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		}
		t0 := time.Now()
		created, err := b.kube.CoreV1().Services(realNS).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			createErr = fmt.Errorf("create service %s: %w", name, err)
			results[i] = sample{-1, -1}
			continue
		}
		b.mu.Lock()
		b.services[name] = string(created.UID)
		b.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = sample{-1, -1}
			var ip string
			_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
				ip = ips.get(name)
				return ip != "", nil
			})
			if ip == "" {
				return
			}
			results[i].ingress = time.Since(t0).Seconds()
			_ = wait.PollUntilContextCancel(ctx, realPoll, true, func(ctx context.Context) (bool, error) {
				return answered(ctx, ip), nil
			})
			if ctx.Err() == nil {
				results[i].answer = time.Since(t0).Seconds()
			}
		}()
	}
	wg.Wait()
	var cs, is []float64
	for _, r := range results {
		if r.ingress >= 0 {
			is = append(is, r.ingress)
		}
		if r.answer >= 0 {
			cs = append(cs, r.answer)
		}
	}
	creation, ingress = NewLatencies(cs, n-len(cs)), NewLatencies(is, n-len(is))
	b.log.Info("services", "answering", len(cs), "of", n, "p50", creation.P50, "p99", creation.P99)
	if createErr != nil {
		return creation, ingress, createErr
	}
	if len(cs) < n {
		return creation, ingress, fmt.Errorf("%d of %d services never answered", n-len(cs), n)
	}
	return creation, ingress, nil
}

// ingressMap holds the Services' ingress IPs by name.
type ingressMap struct {
	mu  sync.Mutex
	ips map[string]string
}

func (m *ingressMap) get(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ips[name]
}

func (m *ingressMap) set(name, ip string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ips[name] = ip
}

// lbTargets returns the benchmark's load balancers' targets (instance IDs
// and IPs) by Service name.
func (b *realBench) lbTargets(ctx context.Context) (map[string]map[string]bool, error) {
	lbs, err := b.cloud.ListLoadBalancers(ctx, client.ListOptions{PageSize: 1000})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	byUID := map[string]string{}
	for name, uid := range b.services {
		byUID[uid] = name
	}
	b.mu.Unlock()
	out := map[string]map[string]bool{}
	for _, lb := range lbs {
		name, ok := byUID[lb.Tags[mcprovider.TagServiceUID]]
		if !ok {
			continue
		}
		ips := map[string]bool{}
		// A target is an instance (a node with a provider ID) or an
		// address; both are kept.
		for _, t := range lb.Targets {
			if t.InstanceID != "" {
				ips[t.InstanceID] = true
			}
			if t.IP != "" {
				ips[t.IP] = true
			}
		}
		out[name] = ips
	}
	return out, nil
}

// watchTargets polls minicloud's load balancers until every benchmark
// Service's load balancer satisfies has, and returns when each did first.
func (b *realBench) watchTargets(ctx context.Context, has func(map[string]bool) bool) (map[string]time.Time, error) {
	seen := map[string]time.Time{}
	err := wait.PollUntilContextCancel(ctx, realPoll, true, func(ctx context.Context) (bool, error) {
		all, err := b.lbTargets(ctx)
		if err != nil {
			return false, nil
		}
		now := time.Now()
		for name, ips := range all {
			if _, ok := seen[name]; !ok && has(ips) {
				seen[name] = now
			}
		}
		return len(seen) >= len(b.services), nil
	})
	return seen, err
}

// addNode creates a minicloud instance, which becomes a real node, and
// measures per load balancer: the Node registered (and, separately, Ready
// and initialized) → its IP among the targets.
func (b *realBench) addNode(ctx context.Context) (fromRegistered, fromReady Latencies, join Seconds, err error) {
	suffix := fmt.Sprintf("%04x", time.Now().UnixNano()&0xffff)
	b.node = addedPrefix + suffix
	in, err := b.cloud.CreateInstance(ctx, api.InstanceCreate{
		Name: b.node, Type: "mc.small", Zone: minicloud.Zones[len(minicloud.Zones)-1],
		Tags: map[string]string{devenv.NodeTagKey: devenv.NodeTagValue},
	})
	if err != nil {
		return fromRegistered, fromReady, 0, fmt.Errorf("create instance: %w", err)
	}
	b.instance, b.nodeIP = in.ID, in.PrivateIP
	b.log.Info("instance created", "node", b.node, "ip", b.nodeIP)
	var registered, ready time.Time
	nodeCtx, stopNode := context.WithCancel(ctx)
	defer stopNode()
	nodeDone := make(chan struct{})
	go func() {
		defer close(nodeDone)
		_ = wait.PollUntilContextCancel(nodeCtx, realPoll, true, func(ctx context.Context) (bool, error) {
			n, err := b.kube.CoreV1().Nodes().Get(ctx, b.node, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if registered.IsZero() {
				registered = time.Now()
			}
			if devenv.Initialized(n) && nodeReady(n) {
				ready = time.Now()
				return true, nil
			}
			return false, nil
		})
	}()
	seen, werr := b.watchTargets(ctx, func(ips map[string]bool) bool { return ips[b.nodeIP] || ips[b.instance] })
	// On a busy machine the new node's Ready condition can flap; its
	// moment is waited for at most a minute past the load balancers'.
	select {
	case <-nodeDone:
	case <-time.After(time.Minute):
		stopNode()
		<-nodeDone
	}
	if registered.IsZero() {
		return fromRegistered, fromReady, 0, fmt.Errorf("node %s never registered: %v", b.node, werr)
	}
	var reg, rdy []float64
	for _, t := range seen {
		reg = append(reg, max(t.Sub(registered).Seconds(), 0))
		if !ready.IsZero() {
			rdy = append(rdy, t.Sub(ready).Seconds())
		}
	}
	missing := len(b.services) - len(seen)
	if !ready.IsZero() {
		join = Seconds(ready.Sub(registered).Seconds())
	}
	fromRegistered, fromReady = NewLatencies(reg, missing), NewLatencies(rdy, missing)
	b.log.Info("node added", "loadBalancers", len(seen), "p50", fromRegistered.P50, "p99", fromRegistered.P99)
	if werr != nil {
		return fromRegistered, fromReady, join, fmt.Errorf("%d of %d load balancers without the node: %w", missing, len(b.services), werr)
	}
	return fromRegistered, fromReady, join, nil
}

// removeNode deletes the added node's instance (its processes killed as at
// power-off), then its Node, and measures per load balancer: the Node
// deleted → its IP gone from the targets.
func (b *realBench) removeNode(ctx context.Context) (Latencies, error) {
	if err := b.cloud.DeleteInstance(ctx, b.instance); err != nil {
		return Latencies{}, fmt.Errorf("delete instance %s: %w", b.instance, err)
	}
	// The environment kills a deleted instance's node within its fleet
	// period (2 s); the Node is deleted after that, so that no kubelet is
	// left to register it again, and well before the node would turn
	// NotReady (the node monitor's grace period, 20 s).
	if err := wait.PollUntilContextCancel(ctx, realPoll, true, func(ctx context.Context) (bool, error) {
		_, err := b.cloud.GetInstance(ctx, b.instance)
		return client.IsNotFound(err), nil
	}); err != nil {
		return Latencies{}, fmt.Errorf("instance %s still listed after its deletion: %w", b.instance, err)
	}
	select {
	case <-time.After(6 * time.Second):
	case <-ctx.Done():
		return Latencies{}, ctx.Err()
	}
	before, err := b.lbTargets(ctx)
	if err != nil {
		return Latencies{}, err
	}
	already := 0
	for _, ips := range before {
		if !ips[b.nodeIP] && !ips[b.instance] {
			already++
		}
	}
	t0 := time.Now()
	if err := b.kube.CoreV1().Nodes().Delete(ctx, b.node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return Latencies{}, fmt.Errorf("delete node %s: %w", b.node, err)
	}
	if already > 0 {
		b.log.Info("load balancers without the node before its deletion (counted as 0 s)", "count", already)
	}
	seen, werr := b.watchTargets(ctx, func(ips map[string]bool) bool { return !ips[b.nodeIP] && !ips[b.instance] })
	var s []float64
	for _, t := range seen {
		s = append(s, max(t.Sub(t0).Seconds(), 0))
	}
	l := NewLatencies(s, len(b.services)-len(seen))
	b.log.Info("node removed", "loadBalancers", len(seen), "p50", l.P50, "p99", l.P99)
	if werr != nil {
		return l, fmt.Errorf("%d load balancers still with the node: %w", l.Missing, werr)
	}
	return l, nil
}
