package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/devenv"
	"github.com/stratus-ccm/stratus/internal/vcsim"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// manager is one side of the comparison.
type manager string

const (
	upstream manager = "upstream"
	stratus  manager = "stratus"
)

// env is one scenario run: a control plane, a minicloud and a manager.
type env struct {
	kube  kubernetes.Interface
	cloud *client.Client
	// mgrCloud uses the manager's token; it only reads the manager's stats.
	mgrCloud *client.Client
	// mgr is the manager process (for its RSS).
	mgr *exec.Cmd
	// instances by name, as created.
	mu        sync.Mutex
	instances map[string]*api.Instance
	// vc is the simulated vCenter of a vSphere scenario, vms its VMs by name.
	vc  *vcsim.Server
	vms map[string]vcsim.VM
	// cloudURL is minicloud's; managerToken and harnessToken its two tokens.
	cloudURL, managerToken, harnessToken string
	// providerID is the provider ID of an instance's Node, as the manager
	// under test writes it (minicloud://, or openstack:/// for the dialect).
	providerID func(instanceID string) string
	// floatingPool holds the OpenStack dialect's floating IPs (invalid for
	// the other clouds).
	floatingPool netip.Prefix
	// auditLog is the API server's audit log; countsSince is when the
	// counts were last reset (resetCounts).
	auditLog    string
	countsSince time.Time
}

// resetCounts zeroes the cloud's call counts and starts counting the
// manager's Kubernetes API requests anew.
func (e *env) resetCounts(ctx context.Context) error {
	e.countsSince = time.Now()
	if e.cloud == nil {
		return nil
	}
	return e.cloud.ResetStats(ctx)
}

// TunedFlags are the flags of the "tuned" mode, for both managers (both
// accept them).
var TunedFlags = []string{"--kube-api-qps=200", "--kube-api-burst=400", "--concurrent-service-syncs=10", "--concurrent-node-syncs=10"}

// managerFlags are the flags o's mode gives both managers: none in
// "defaults" (each manager's own), TunedFlags in "tuned", otherwise
// o's --kube-api-qps/burst.
func managerFlags(o Options) []string {
	switch o.Mode {
	case ModeDefaults:
		return nil
	case ModeTuned:
		return TunedFlags
	}
	return []string{"--kube-api-qps=" + strconv.Itoa(o.KubeAPIQPS), "--kube-api-burst=" + strconv.Itoa(o.KubeAPIBurst)}
}

// poll is how often scenarios look at the cluster while waiting.
const poll = 200 * time.Millisecond

// runOne runs scenario sc for manager m on a fresh environment.
func runOne(ctx context.Context, o Options, sc scenario, m manager) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	dir, err := os.MkdirTemp(o.WorkDir, sc.name+"-"+string(m)+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	ports, err := devenv.FreePorts()
	if err != nil {
		return nil, err
	}
	audit, auditLog, err := auditArgs(filepath.Join(dir, "audit"))
	if err != nil {
		return nil, err
	}
	cp := &devenv.ControlPlane{Dir: filepath.Join(dir, "cluster"), BinDir: o.BinDir, Ports: ports, APIServerArgs: audit}
	if err := cp.Start(ctx); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	defer cp.Stop(context.WithoutCancel(ctx))
	cfg, err := cp.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000 // the harness, not the manager under test
	cfg.UserAgent = harnessAgent
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}

	var (
		e         *env
		cloudArgs []string
		bin       string
	)
	switch sc.cloud {
	case vsphereCloud:
		var stop func()
		if e, cloudArgs, stop, err = startVSphere(ctx, dir, o, sc); err != nil {
			return nil, err
		}
		defer stop()
		e.kube = kube
		bin = filepath.Join(o.BinDir, "vsphere-ccm")
	case openstackCloud:
		var stop func()
		if e, cloudArgs, stop, err = startOpenStack(ctx, dir, o); err != nil {
			return nil, err
		}
		defer stop()
		e.kube = kube
		bin = filepath.Join(o.BinDir, "openstack-ccm")
	default:
		var stop func()
		if e, cloudArgs, stop, err = startMinicloud(ctx, dir, o); err != nil {
			return nil, err
		}
		defer stop()
		e.kube = kube
		bin = filepath.Join(o.BinDir, "ccm")
	}
	e.auditLog, e.countsSince = auditLog, time.Now()
	if err := sc.setup(ctx, e, o.Sizes); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if m != upstream {
		bin = o.StratusCCM
	}
	if m == stratusPlugin {
		var stop func()
		if cloudArgs, stop, err = startPlugin(ctx, o, sc.name, cloudArgs); err != nil {
			return nil, err
		}
		defer stop()
	}
	kc := cp.KubeconfigPath()
	cmd := exec.CommandContext(ctx, bin, append(cloudArgs,
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0",
		"--configure-cloud-routes=false", "--cluster-name=bench")...)
	cmd.Args = append(cmd.Args, managerFlags(o)...)
	logFile, err := os.Create(filepath.Join(o.WorkDir, sc.name+"-"+string(m)+".log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The manager dies with the harness, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", m, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	e.mgr = cmd

	type outcome struct {
		m   Metrics
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		met, err := sc.measure(ctx, e, o.Sizes)
		done <- outcome{met, err}
	}()
	select {
	case out := <-done:
		return out.m, out.err
	case err := <-exited:
		cancel()
		<-done
		return nil, fmt.Errorf("%s exited early: %v (log: %s)", m, err, logFile.Name())
	}
}

// startMinicloud runs a minicloud for a scenario and writes the minicloud
// provider's cloud config; it returns the scenario's env (without its
// Kubernetes client) and the managers' provider flags.
func startMinicloud(ctx context.Context, dir string, o Options) (*env, []string, func(), error) {
	e, stopCloud, err := startMinicloudEnv(ctx, filepath.Join(dir, "minicloud"), o.Cloud, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	fail := func(err error) (*env, []string, func(), error) { stopCloud(); return nil, nil, nil, err }
	cloudConfig := filepath.Join(dir, "cloud.yaml")
	// The provider keeps under the token's limit on its own (rateLimit), so
	// neither manager spends requests on 429 answers; its burst is half the
	// server's, which leaves room for requests that arrive bunched.
	provider := fmt.Sprintf("url: %s\ntoken: %s\n", e.cloudURL, e.managerToken)
	if o.Cloud.RateLimit > 0 {
		provider += fmt.Sprintf("rateLimit: %g\nburst: %d\n", o.Cloud.RateLimit, max(1, o.Cloud.Burst/2))
	}
	if err := os.WriteFile(cloudConfig, []byte(provider), 0o600); err != nil {
		return fail(err)
	}
	return e, []string{"--cloud-provider=minicloud", "--cloud-config=" + cloudConfig}, stopCloud, nil
}

// startMinicloudEnv runs a minicloud with l's limits (and the OpenStack
// dialect when dialect is set) and returns the scenario's env, without its
// Kubernetes client, and the function that stops the cloud.
func startMinicloudEnv(ctx context.Context, dir string, l CloudLimits, dialect *mos.Options) (*env, func(), error) {
	cloudURL, token, floating, stopCloud, err := startCloud(ctx, dir, l, dialect)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*env, func(), error) { stopCloud(); return nil, nil, err }
	// The harness has its own unlimited token, so its calls neither count in
	// the manager's stats nor spend the manager's rate limit.
	harness, err := client.New(cloudURL, token[1])
	if err != nil {
		return fail(err)
	}
	if l.LatencyMS > 0 {
		if _, err := harness.SetFaults(ctx, api.Faults{LatencyMS: l.LatencyMS}); err != nil {
			return fail(fmt.Errorf("set minicloud latency: %w", err))
		}
	}
	mgrCloud, err := client.New(cloudURL, token[0])
	if err != nil {
		return fail(err)
	}
	e := &env{
		cloud: harness, mgrCloud: mgrCloud, instances: map[string]*api.Instance{},
		cloudURL: cloudURL, managerToken: token[0], harnessToken: token[1],
		providerID: mcprovider.ProviderID,
	}
	if dialect != nil {
		e.floatingPool = floating
	}
	return e, stopCloud, nil
}

// startCloud runs a minicloud in this process with two tokens: [0] for the
// manager, [1] for the harness, and, when dialect is set, its OpenStack
// dialect, whose load balancers provision for l.OpenStackProvisionDelay. It
// returns the cloud's URL, the tokens and its public pool (the dialect's
// floating IPs).
func startCloud(ctx context.Context, dir string, l CloudLimits, dialect *mos.Options) (string, [2]string, netip.Prefix, func(), error) {
	cfg := minicloud.DefaultConfig()
	cfg.StateDir = dir
	tokens := [2]string{randomToken(), randomToken()}
	cfg.Tokens = tokens[:]
	cfg.RateLimit, cfg.Burst = l.RateLimit, l.Burst
	// The harness's own calls (creating thousands of instances, reading
	// load balancers while waiting) neither count nor are limited.
	cfg.UnlimitedTokens = []string{tokens[1]}
	cfg.LBProvisionDelay = l.LBProvisionDelay
	if dialect != nil {
		cfg.LBProvisionDelay = l.OpenStackProvisionDelay
	}
	// The managers only see the API. With every node behind every load
	// balancer (5,000 x 1,000 in memory) health-checking them would make
	// the harness the biggest load on the machine.
	cfg.NoDataPlane = true
	cfg.Logger = logr.Discard()
	srv, err := minicloud.NewServer(cfg)
	if err != nil {
		return "", tokens, netip.Prefix{}, nil, err
	}
	if dialect != nil {
		if _, err := mos.Mount(srv, *dialect); err != nil {
			srv.Close()
			return "", tokens, netip.Prefix{}, nil, fmt.Errorf("OpenStack dialect: %w", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return "", tokens, netip.Prefix{}, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	return "http://" + ln.Addr().String(), tokens, cfg.PublicCIDR, func() { cancel(); <-done }, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createNodes creates an instance and a Node for each name.
func (e *env) createNodes(ctx context.Context, names []string) error {
	if err := e.createInstances(ctx, names); err != nil {
		return err
	}
	return e.registerNodes(ctx, names)
}

// createInstances creates a minicloud instance per name, 16 at a time, with
// the harness's unlimited token.
func (e *env) createInstances(ctx context.Context, names []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, name := range names {
		g.Go(func() error {
			inst, err := e.cloud.CreateInstance(ctx, api.InstanceCreate{Name: name, Type: "mc.small", Zone: minicloud.Zones[i%len(minicloud.Zones)]})
			if err != nil {
				return fmt.Errorf("create instance %s: %w", name, err)
			}
			e.mu.Lock()
			e.instances[name] = inst
			e.mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// createInitializedNodes creates an instance and a Node per name, the Node
// already initialized as a cloud node controller leaves it (provider ID,
// instance-type and topology labels, addresses, no uninitialized taint): a
// cluster whose manager starts, or restarts, on nodes that joined long ago.
func (e *env) createInitializedNodes(ctx context.Context, names []string) error {
	if err := e.createInstances(ctx, names); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, name := range names {
		g.Go(func() error {
			e.mu.Lock()
			inst := e.instances[name]
			e.mu.Unlock()
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
					corev1.LabelHostname:                name,
					corev1.LabelInstanceTypeStable:      inst.Type,
					corev1.LabelInstanceType:            inst.Type,
					corev1.LabelTopologyZone:            inst.Zone,
					corev1.LabelFailureDomainBetaZone:   inst.Zone,
					corev1.LabelTopologyRegion:          inst.Region,
					corev1.LabelFailureDomainBetaRegion: inst.Region,
				}},
				Spec: corev1.NodeSpec{ProviderID: e.providerID(inst.ID)},
			}
			if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create node %s: %w", name, err)
			}
			now := metav1.Now()
			n.Status = corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: inst.PrivateIP}, {Type: corev1.NodeHostName, Address: name}},
			}
			if inst.PublicIP != "" {
				n.Status.Addresses = slices.Insert(n.Status.Addresses, 1, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: inst.PublicIP})
			}
			if _, err := e.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("node %s status: %w", name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// heartbeat acts as the nodes' kubelets for d: each Node's status is
// reported (its Ready condition's heartbeat time) once every period, as
// kubelet does when nothing changes (--node-status-report-frequency, 5
// minutes by default), the reports spread evenly over the period. It
// returns how many reports it made.
func (e *env) heartbeat(ctx context.Context, names []string, period, d time.Duration) (int, error) {
	if len(names) == 0 {
		return 0, nil
	}
	// The window only stops new reports; those under way finish with ctx.
	window, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(period / time.Duration(len(names)))
	defer tick.Stop()
	// Reports go out on schedule even when the API server is slow: up to 16
	// at once (a slow report must not hold back the others, as kubelets are
	// independent).
	var (
		g    errgroup.Group
		sent atomic.Int64
	)
	g.SetLimit(16)
	for i := 0; window.Err() == nil; i++ {
		select {
		case <-window.Done():
			continue
		case <-tick.C:
		}
		name := names[i%len(names)]
		g.Go(func() error {
			now := time.Now().UTC().Format(time.RFC3339)
			patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q}]}}`, now)
			_, err := e.kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			if err != nil {
				return fmt.Errorf("heartbeat of node %s: %w", name, err)
			}
			sent.Add(1)
			return nil
		})
	}
	err := g.Wait()
	return int(sent.Load()), err
}

// registerNodes registers a Node per name (as kubelet with
// --cloud-provider=external does), 32 at a time: a burst of joining nodes.
func (e *env) registerNodes(ctx context.Context, names []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, name := range names {
		g.Go(func() error { return e.registerNode(ctx, name) })
	}
	return g.Wait()
}

func (e *env) registerNode(ctx context.Context, name string) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: cloudapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	// The manager may write the Node between create and status: retry on
	// conflicts as a kubelet does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := e.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		if e.vms != nil {
			cur.Status.NodeInfo.SystemUUID = e.vmUUID(name)
		}
		cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
		if len(cur.Status.Addresses) == 0 {
			cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
		}
		_, err = e.kube.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	return nil
}

// createServices creates count LoadBalancer Services named prefix-<i>.
func (e *env) createServices(ctx context.Context, prefix string, count int) error {
	return e.createServicesFrom(ctx, prefix, 0, count)
}

// createServicesFrom creates count LoadBalancer Services named prefix-<i>,
// i from from.
func (e *env) createServicesFrom(ctx context.Context, prefix string, from, count int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := from; i < from+count; i++ {
		g.Go(func() error {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: metav1.NamespaceDefault},
				Spec: corev1.ServiceSpec{
					Type:     corev1.ServiceTypeLoadBalancer,
					Selector: map[string]string{"app": prefix},
					Ports:    []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
				},
			}
			if _, err := e.kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create service %s: %w", svc.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// waitInitialized waits until want Nodes have no uninitialized taint.
func (e *env) waitInitialized(ctx context.Context, want int) error {
	return e.until(ctx, fmt.Sprintf("%d nodes initialized", want), func(ctx context.Context) (bool, error) {
		nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, node := range nodes.Items {
			if node.Spec.ProviderID != "" && !hasTaint(&node, cloudapi.TaintExternalCloudProvider) {
				n++
			}
		}
		return n >= want, nil
	})
}

// waitIngress waits until want Services have ingress.
func (e *env) waitIngress(ctx context.Context, want int) error {
	return e.until(ctx, fmt.Sprintf("%d services with ingress", want), func(ctx context.Context) (bool, error) {
		n, err := e.servicesWithIngress(ctx)
		return err == nil && n >= want, nil
	})
}

// servicesWithIngress counts the Services that have ingress.
func (e *env) servicesWithIngress(ctx context.Context) (int, error) {
	svcs, err := e.kube.CoreV1().Services(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, fmt.Errorf("list services: %w", err)
	}
	n := 0
	for _, s := range svcs.Items {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			n++
		}
	}
	return n, nil
}

// loadBalancerCount is how many load balancers the cloud has.
func (e *env) loadBalancerCount(ctx context.Context) (int, error) {
	lbs, err := e.cloud.ListLoadBalancers(ctx, client.ListOptions{PageSize: 1000})
	if err != nil {
		return 0, fmt.Errorf("list load balancers: %w", err)
	}
	return len(lbs), nil
}

// waitTargets waits until want load balancers have targets instances.
func (e *env) waitTargets(ctx context.Context, want, targets int) error {
	return e.until(ctx, fmt.Sprintf("%d load balancers with %d targets", want, targets), func(ctx context.Context) (bool, error) {
		lbs, err := e.cloud.ListLoadBalancers(ctx, client.ListOptions{PageSize: 1000})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, lb := range lbs {
			if len(lb.Targets) == targets {
				n++
			}
		}
		return n >= want, nil
	})
}

func (e *env) until(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	if err := wait.PollUntilContextCancel(ctx, poll, true, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// managerStats are the manager's minicloud calls since the last reset: total
// and per operation; calls answered 429 are counted too, and also as
// "throttled".
func (e *env) managerStats(ctx context.Context) (int64, map[string]int64, error) {
	st, err := e.mgrCloud.TokenStats(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("minicloud stats: %w", err)
	}
	total := int64(0)
	ops := map[string]int64{}
	for op, n := range st.Requests {
		if strings.Contains(op, "/v1/_") { // the stats reads themselves
			continue
		}
		ops[op] = n
		total += n
	}
	if st.Throttled > 0 {
		ops["throttled (429)"] = st.Throttled
	}
	return total, ops, nil
}

// cpuSeconds is the CPU time (user and system) the manager has used.
func (e *env) cpuSeconds() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.mgr.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read manager CPU time: %w", err)
	}
	// The command name (field 2) may hold spaces; the fields after it are
	// counted from its closing parenthesis: utime and stime are 14 and 15.
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("manager /proc stat: %d fields after the name", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("manager /proc stat %q: %w", s, err)
		}
		ticks += v
	}
	return ticks / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// peakRSS is the manager's peak resident set (VmHWM) in MiB.
func (e *env) peakRSS() (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", e.mgr.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read manager memory: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmHWM %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("VmHWM not found in /proc status")
}
