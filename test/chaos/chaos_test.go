// Package chaos runs stratus-ccm through a seeded window of churn and
// failures and then audits what it left behind.
//
// Two or three stratus-ccm replicas (child processes, leader election on)
// run against a real control plane (internal/dev/testenv) and a real minicloud
// (`stratus minicloud serve` in a child process, on persistent state). For
// a fixed window, at once: nodes join, leave, stop and restart (simulated
// kubelets of internal/dev/devenv), LoadBalancer Services are created, changed
// (ports, externalTrafficPolicy, source ranges), deleted and recreated under
// the same name; the cloud fails 30% of its calls, throttles in bursts with
// Retry-After, answers slowly, fails or empties its instance listings, and
// is killed with SIGKILL and restarted; the leader is killed with SIGKILL
// periodically and once partitioned from the API server by a TCP proxy.
// Then every fault stops and the audit waits for the end state: each
// Service has exactly one load balancer with the right listeners, targets
// and source ranges carrying traffic, no load balancer outlives its
// Service, no Node was deleted while its instance existed, every route is
// present, and no credential appears in any log. The result is a table.
//
// A run is parameterised by the managers' provider (provider_test.go):
// TestChaos runs the minicloud provider, TestChaosVSphere the vSphere
// provider on a simulated vCenter, TestChaosOpenStack the OpenStack
// provider on minicloud's OpenStack dialect, TestChaosPlugin the minicloud
// provider in plugin processes (one per replica) killed with SIGKILL.
// Every run's replicas reach the cloud each at its own cloud-front
// address with its own config.
//
// `go test ./test/chaos` runs small windows (part of make test);
// `make chaos` (and chaos-vsphere, chaos-openstack, chaos-plugin) the full
// ones (see docs/reliability.md).
package chaos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	mccli "github.com/stratus-ccm/stratus/internal/dev/cli/minicloudcmd"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/annotations"

	// The providers the replicas (this binary re-executed) may run, as
	// stratus-ccm has them.
	_ "github.com/stratus-ccm/stratus/providers/openstack"
	_ "github.com/stratus-ccm/stratus/providers/vsphere"
)

// size is the shape of one chaos run.
type size struct {
	nodes, services int
	replicas        int
	window          time.Duration
	churnEvery      time.Duration
	faultStep       time.Duration
	killEvery       time.Duration
	partitionFor    time.Duration
	converge        time.Duration // deadline of the audit's convergence
	trafficSample   int           // Services whose traffic is checked
	// healthCheckInterval, if set, is every Service's
	// load-balancer-health-check-interval: minicloud probes every node of
	// every load balancer, nodes × Services probes per interval.
	healthCheckInterval string
}

var (
	full       = flag.Bool("chaos.full", false, "run the full chaos window (make chaos) instead of the short one")
	seed       = flag.Uint64("chaos.seed", 20261201, "seed of the churn and fault schedule")
	nodesFlag  = flag.Int("chaos.nodes", 0, "nodes (0: the size's default)")
	svcsFlag   = flag.Int("chaos.services", 0, "LoadBalancer Services (0: the size's default)")
	windowFlag = flag.Duration("chaos.window", 0, "chaos window (0: the size's default)")
	reportFlag = flag.String("chaos.report", "", "write the report table (markdown) to this file")
	logsFlag   = flag.String("chaos.logs", "", "write every process's log into this directory")
	budgetFlag = flag.Float64("chaos.budget-rate", 0, "each provider's request budget in calls per second (0: stratus's default), to see how the convergence scales with it")
	managerV   = flag.Int("chaos.manager-v", 0, "the replicas' log verbosity (--v), to see in -chaos.logs what their controllers did")
)

var (
	short = size{nodes: 6, services: 6, replicas: 2, window: 50 * time.Second, churnEvery: time.Second,
		faultStep: 5 * time.Second, killEvery: 20 * time.Second, partitionFor: 10 * time.Second,
		converge: 4 * time.Minute, trafficSample: 6}
	fullSize = size{nodes: 300, services: 300, replicas: 3, window: 10 * time.Minute, churnEvery: 500 * time.Millisecond,
		faultStep: 20 * time.Second, killEvery: 20 * time.Second, partitionFor: 15 * time.Second,
		converge: 15 * time.Minute, trafficSample: 60, healthCheckInterval: "60s"}
)

func chosenSize(p *provider) size {
	s := p.short
	if *full {
		s = fullSize
	}
	if *nodesFlag > 0 {
		s.nodes = *nodesFlag
	}
	if *svcsFlag > 0 {
		s.services = *svcsFlag
	}
	if *windowFlag > 0 {
		s.window = *windowFlag
	}
	return s
}

// isolated: the test runs in a network namespace of its own (ownNetwork).
var isolated bool

func TestMain(m *testing.M) {
	managertest.RunHelperProcess()
	if raw := os.Getenv(minicloudEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		cmd := mccli.NewCommand()
		cmd.SetArgs(args)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "minicloud:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code, reran, own := ownNetwork()
	if reran {
		os.Exit(code)
	}
	isolated = own
	// No control plane for the package: each run starts its own
	// (controlPlane). The runs mostly wait out their windows: all of them
	// at once unless -test.parallel says otherwise.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}

// controlPlane starts a control plane for one chaos run, stopped when the
// test ends. The runs go side by side (each mostly waits out its window),
// so each needs a cluster of its own: its managers act on every Node of the
// cluster, and would delete the other runs' Nodes, whose instances are not
// in their cloud. envtest's Service IP range (a /24) holds fewer than the
// full size's 300 Services.
//
// Side by side, the runs share the test's network namespace, where a node
// port is one listener on every address (devenv.NodePorts): each run's API
// server allocates node ports from a range of its own (a fourth of the
// default 30000-32767, by address block), so that no run answers or resets
// another's traffic.
func controlPlane(t *testing.T, block int) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane; skipped under -short")
	}
	flags := map[string]string{"service-cluster-ip-range": serviceCIDR}
	if !*full {
		if block == 0 {
			block = 251
		}
		first := 30000 + (block-251)*690
		flags["service-node-port-range"] = fmt.Sprintf("%d-%d", first, first+689)
	}
	env, err := testenv.StartWith(flags)
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	t.Cleanup(env.Stop)
	return env
}

// Address pools of the chaos cloud: 127.<block>.0.0/16 (block 251 unless
// the provider has its own, so that runs of different providers can share
// the machine), a block neither minicloudtest's random pools nor stratus
// dev's derived blocks use.
func pools(block int) [3]string {
	if block == 0 {
		block = 251
	}
	return [3]string{fmt.Sprintf("127.%d.0.0/18", block), fmt.Sprintf("127.%d.64.0/18", block), fmt.Sprintf("127.%d.128.0/17", block)}
}

// managerConfig is the replicas' --config: the run's provider (whose
// block sets a short instance-cache freshness, so that the deletion guard
// spaces its two confirmations by little), orphan grace and deletion budget
// sized for a run of minutes, not a cluster's life.
const managerConfig = `apiVersion: stratus.io/v1alpha1
kind: ManagerConfig
providers:
%s
service:
  orphanGracePeriod: 30s
route:
  resyncPeriod: 30s
nodeLifecycle:
  deletionBudgetPercent: 100
  deletionBudgetMin: 1000
  deletionBudgetWindow: 1m
`

// withBudget returns the providers block with a budget of rate calls per
// second in each provider (block unchanged when rate is 0).
func withBudget(block string, rate float64) string {
	if rate == 0 {
		return block
	}
	var b strings.Builder
	for line := range strings.SplitAfterSeq(block, "\n") {
		b.WriteString(line)
		if strings.HasPrefix(line, "- name:") {
			fmt.Fprintf(&b, "  budget:\n    rate: %g\n", rate)
		}
	}
	return b.String()
}

// serviceCIDR is the control plane's Service IP range.
const serviceCIDR = "10.96.0.0/16"

// clusterCIDR holds the nodes' pod CIDRs (10.<seq/256>.<seq%256>.0/24).
const clusterCIDR = "10.0.0.0/8"

func TestChaos(t *testing.T) { runChaos(t, minicloudProvider()) }

// runChaos is one chaos run of the managers with provider p.
func runChaos(t *testing.T, p *provider) {
	// Beside the other providers' runs: each has its own control plane,
	// cloud, address block (p.block) and node ports. Full-size runs (make
	// chaos) go one at a time: their Services need the whole node port
	// range.
	if !*full {
		t.Parallel()
	}
	env := controlPlane(t, p.block)
	sz := chosenSize(p)
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dir := t.TempDir()
	token := minicloudtest.RandomToken()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cloud := startCloud(t, filepath.Join(dir, "minicloud"), tokenFile, pools(p.block), p.cloudArgs...)
	cl, err := client.New(cloud.url, token, client.WithUserAgent("stratus-chaos"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cloud.waitUp(ctx, cl); err != nil {
		t.Fatalf("minicloud did not come up: %v\n%s", err, cloud.output())
	}
	front := startCloudFront(t, cloud.url, sz.replicas, p.listing)
	cc := &chaosCloud{dir: dir, token: token, tokenFile: tokenFile, ns: ns, replicas: sz.replicas,
		kubeconfig: managertest.WriteKubeconfig(t, env.Config), cloud: cloud, cl: cl, front: front}
	// Each replica reaches the cloud at its own front address, with a
	// config of its own.
	blocks := p.setup(t, cc)
	if len(blocks) != sz.replicas {
		t.Fatalf("provider %s: setup made %d configs for %d replicas", p.name, len(blocks), sz.replicas)
	}
	configs := make([]string, sz.replicas)
	for i, b := range blocks {
		configs[i] = writeFile(t, dir, fmt.Sprintf("stratus-%d.yaml", i+1), fmt.Sprintf(managerConfig, withBudget(b, *budgetFlag)))
	}
	args := []string{
		"--cluster-name=" + ns,
		"--cluster-cidr=" + clusterCIDR,
		"--configure-cloud-routes=" + fmt.Sprint(p.routes != nil),
		"--route-reconciliation-period=5s",
		"--load-balancer-resync-period=30s",
		"--leader-elect=true",
		"--leader-elect-resource-namespace=" + ns,
		"--leader-elect-lease-duration=6s",
		"--leader-elect-renew-deadline=4s",
		"--leader-elect-retry-period=1s",
		"--node-monitor-period=2s",
		"--node-deletion-grace-period=5s",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--secure-port=0",
	}
	if *managerV > 0 {
		args = append(args, fmt.Sprintf("--v=%d", *managerV))
	}
	apiURL, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	var replicas []*replica
	for i := range sz.replicas {
		replicas = append(replicas, newReplica(t, i+1, env.Config, apiURL.Host, append([]string{"--config=" + configs[i]}, args...)))
	}
	// Stop the supervisors before the processes' own cleanups kill them,
	// so that no replica is restarted after the test.
	defer func() {
		for _, r := range replicas {
			r.stop()
		}
	}()
	for _, r := range replicas {
		r.supervise(t)
	}

	kcfg := rest.CopyConfig(env.Config)
	kcfg.QPS, kcfg.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	cc.kube = cs
	// The control plane is the package's: the next run's managers must not
	// find this run's Nodes and Services (registered before newWorld's
	// cleanup, so that it runs after the kubelets have stopped).
	var w *world
	t.Cleanup(func() {
		if w != nil {
			w.cleanUp()
		}
	})
	w = newWorld(t, cs, cc, p, rand.New(rand.NewPCG(*seed, *seed^0x5eed)))
	w.watchDeletions(ctx)
	if sz.healthCheckInterval != "" {
		w.annotations = map[string]string{annotations.LBHealthCheckInterval.Name: sz.healthCheckInterval}
	}
	if isolated {
		w.servePorts(ctx)
	}

	t.Logf("chaos (%s): %d nodes, %d services, %d replicas, window %s, seed %d", p.name, sz.nodes, sz.services, sz.replicas, sz.window, *seed)
	populateStart := time.Now()
	w.populate(ctx, sz.nodes, sz.services)
	t.Logf("chaos: populated in %s", time.Since(populateStart).Round(time.Second))

	// The window: churn, cloud faults, leader kills and a partition at once.
	winCtx, winCancel := context.WithTimeout(ctx, sz.window)
	defer winCancel()
	faults := &faultDriver{t: t, cloud: cloud, cl: cl, front: front, step: sz.faultStep, kinds: p.faultKinds(), extra: p.faults, listOp: p.listing.op, reset: p.resetFaults, rng: rand.New(rand.NewPCG(*seed+1, *seed))}
	// The partition falls halfway between two kills, once the leader killed
	// last has had time to be replaced.
	// The pause, likewise, a quarter into the window.
	partitionAt := (sz.window/2/sz.killEvery)*sz.killEvery + sz.killEvery/2
	pauseAt := (sz.window/4/sz.killEvery)*sz.killEvery + sz.killEvery/2
	if pauseAt == partitionAt {
		// A window shorter than two kill periods (the other providers'
		// short runs) would have both at once, and the second would wait
		// out the first past the window's end: the pause comes early (the
		// leader that populated the cluster leads) and the partition halfway
		// through, both before the first kill.
		pauseAt, partitionAt = sz.window/8, sz.window/2
	}
	leaders := &leaderKiller{t: t, replicas: replicas, front: front, every: sz.killEvery,
		partitionAt: partitionAt, partitionFor: sz.partitionFor, pauseAt: pauseAt}
	windowStart := time.Now()
	done := make(chan struct{}, 3)
	go func() { w.churn(ctx, winCtx, sz.churnEvery, sz.nodes, sz.services); done <- struct{}{} }()
	faultsCleared := make(chan error, 1)
	go func() {
		faults.run(winCtx)
		// The faults end with the window: a change of the churn still
		// running (it runs to its end on ctx) must not retry through a
		// fault that outlives the window, such as Keystone refusing every
		// token, until its deadline.
		faultsCleared <- faults.clear(ctx)
		done <- struct{}{}
	}()
	go func() { leaders.run(winCtx); done <- struct{}{} }()
	for range 3 {
		<-done
	}
	t.Logf("chaos: window over after %s", time.Since(windowStart).Round(time.Second))
	if err := <-faultsCleared; err != nil {
		t.Fatal(err)
	}

	// Faults stop: the cloud is up and answers, nothing is cut.
	faults.stop(ctx)
	for _, r := range replicas {
		r.proxy.Heal()
	}

	a := &audit{w: w, sample: sz.trafficSample, logf: t.Logf}
	convergeStart := time.Now()
	t.Logf("chaos: faults stopped at %s", convergeStart.UTC().Format(time.RFC3339Nano))
	converged, problems := a.converge(ctx, sz.converge)
	convergeTime := time.Since(convergeStart)
	// The managers' cloud calls around the convergence: 30 s before the
	// faults stopped, then until the audit found nothing wrong.
	t.Logf("chaos: cloud requests of all replicas per 10s (seconds after the faults stopped):%s",
		indentLines(front.callRates(convergeStart, convergeStart.Add(-30*time.Second), convergeStart.Add(convergeTime), 10*time.Second)))
	final := a.final(ctx)

	logs := map[string]string{"minicloud.log": cloud.output()}
	for _, r := range replicas {
		logs[fmt.Sprintf("stratus-ccm-%d.log", r.id)] = r.output()
	}
	if p.logs != nil {
		maps.Copy(logs, p.logs())
	}
	secrets := map[string]string{"minicloud token": token}
	if p.secrets != nil {
		maps.Copy(secrets, p.secrets(cc))
	}
	if len(env.Config.KeyData) > 0 {
		secrets["API client key (base64)"] = base64.StdEncoding.EncodeToString(env.Config.KeyData)[:48]
		secrets["API client key (PEM body)"] = pemBody(env.Config.KeyData)
	}
	if env.Config.BearerToken != "" {
		secrets["API bearer token"] = env.Config.BearerToken
	}
	leaks := findSecrets(logs, secrets)

	rep := report{
		provider: p.name, size: sz, seed: *seed, full: *full, populate: w.stats.populate,
		window: sz.window, churn: w.stats, faults: faults.stats(), leaders: leaders.stats(replicas),
		converged: converged, convergeTime: convergeTime, atWindowEnd: a.atWindowEnd, final: final, leaks: leaks, secretsChecked: len(secrets),
	}
	if p.report != nil {
		rep.extra = p.report(logs)
	}
	table := rep.markdown()
	t.Logf("chaos report:\n%s", table)
	if *reportFlag != "" {
		if err := os.WriteFile(*reportFlag, []byte(table), 0o644); err != nil {
			t.Errorf("write report: %v", err)
		}
	}
	if *logsFlag != "" {
		if err := writeLogs(*logsFlag, logs); err != nil {
			t.Error(err)
		}
	}

	if !converged {
		t.Errorf("not converged within %s; last problems:\n%s", sz.converge, strings.Join(problems, "\n"))
	}
	for _, v := range final.problems {
		t.Errorf("audit: %s", v)
	}
	for _, v := range w.violations() {
		t.Errorf("wrongly deleted: %s", v)
	}
	if ps := rep.leaders.pause; ps.done && ps.exited == 0 {
		t.Errorf("the paused leader was still running %s after it resumed, although another replica held the lease", pauseMax)
	}
	for _, l := range leaks {
		t.Errorf("credential in logs: %s", l)
	}
}

// pemBody is a stretch of the key's base64 body, as it would appear if a
// PEM block were logged.
func pemBody(pemData []byte) string {
	lines := strings.Split(string(pemData), "\n")
	for _, l := range lines {
		if len(l) >= 40 && !strings.HasPrefix(l, "-----") {
			return l[:40]
		}
	}
	return ""
}

// findSecrets names each secret found in each log.
func findSecrets(logs, secrets map[string]string) []string {
	var found []string
	for file, body := range logs {
		for what, s := range secrets {
			if s != "" && strings.Contains(body, s) {
				found = append(found, fmt.Sprintf("%s in %s", what, file))
			}
		}
	}
	return found
}

// writeFile writes body to dir/name (mode 0600: cloud-configs hold
// credentials) and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostPort joins an IP and a port.
func hostPort(ip string, port int32) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }

// The budget flag reaches every provider of a replica's providers block.
func TestWithBudget(t *testing.T) {
	block := "- name: vsphere\n  type: vsphere\n- name: minicloud\n  type: minicloud\n  instanceCacheFreshness: 5s\n"
	want := "- name: vsphere\n  budget:\n    rate: 20\n  type: vsphere\n- name: minicloud\n  budget:\n    rate: 20\n  type: minicloud\n  instanceCacheFreshness: 5s\n"
	if got := withBudget(block, 20); got != want {
		t.Errorf("withBudget(20) =\n%s\nwant\n%s", got, want)
	}
	if got := withBudget(block, 0); got != block {
		t.Errorf("withBudget(0) changed the block:\n%s", got)
	}
}
