package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/plugin"
	"github.com/stratus-ccm/stratus/pkg/stratus"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// stratusPlugin is stratus-ccm whose provider runs out of process: a
// `stratus-ccm plugin serve` child on a Unix socket, used as
// --cloud-provider=plugin (docs/plugins.md).
const stratusPlugin manager = "stratus-plugin"

// pluginScenarios are the scenarios RunPlugin runs for stratus-ccm with its
// provider in process and through a plugin.
var pluginScenarios = []string{"node-init-burst", "lb-burst"}

// DefaultPluginCalls is how many times RunPlugin makes each provider call
// on each side when it measures the overhead per call.
const DefaultPluginCalls = 300

// PluginReport is bench/results/plugin.json: the same scenarios for
// stratus-ccm with its provider in process and through a plugin, and the
// overhead of single provider calls.
type PluginReport struct {
	Date      time.Time      `json:"date"`
	Machine   Machine        `json:"machine"`
	Cloud     CloudLimits    `json:"cloud"`
	KubeAPI   [2]int         `json:"kubeApiQpsBurst"`
	Scenarios []PluginResult `json:"scenarios"`
	Calls     []CallOverhead `json:"calls"`
}

// PluginResult is one scenario, in process and through the plugin.
type PluginResult struct {
	Name      string         `json:"name"`
	Params    map[string]any `json:"params"`
	InProcess Metrics        `json:"inProcess"`
	Plugin    Metrics        `json:"plugin"`
	// Overhead is plugin - in process per metric: the cost of the plugin
	// in total (seconds for the times, calls for the cloud calls).
	Overhead Metrics `json:"overhead"`
	// Errors say why a side has no numbers.
	Errors map[string]string `json:"errors,omitempty"`
}

// CallOverhead is one provider call made Calls times on each side, from
// the same process to the same minicloud: the provider itself, and the
// plugin client to the provider served on a Unix socket.
type CallOverhead struct {
	Call string `json:"call"`
	// Size says how large the call's objects are ("300 instances").
	Size  string `json:"size,omitempty"`
	Calls int    `json:"calls"`
	// Median and mean durations, in milliseconds.
	InProcessMedianMS float64 `json:"inProcessMedianMs"`
	PluginMedianMS    float64 `json:"pluginMedianMs"`
	InProcessMeanMS   float64 `json:"inProcessMeanMs"`
	PluginMeanMS      float64 `json:"pluginMeanMs"`
	// OverheadMedianMS is PluginMedianMS - InProcessMedianMS: what the
	// protocol adds to one call.
	OverheadMedianMS float64 `json:"overheadMedianMs"`
}

// RunPlugin runs pluginScenarios for stratus-ccm in process and through a
// plugin (each on a fresh control plane and minicloud, as Run does), then
// measures the overhead of single provider calls, each made calls times per
// side. o.Scenarios and o.Managers are ignored.
func RunPlugin(ctx context.Context, o Options, calls int) (*PluginReport, error) {
	if o.Timeout == 0 {
		o.Timeout = 15 * time.Minute
	}
	if o.KubeAPIQPS == 0 {
		o.KubeAPIQPS, o.KubeAPIBurst = 20, 30
	}
	if calls <= 0 {
		calls = DefaultPluginCalls
	}
	for _, bin := range []string{filepath.Join(o.BinDir, "etcd"), filepath.Join(o.BinDir, "kube-apiserver"), o.StratusCCM} {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("bench needs %s: %w (make kubebins build)", bin, err)
		}
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "stratus-bench-plugin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.WorkDir = dir
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	rep := &PluginReport{
		Date:    time.Now().UTC(),
		Machine: Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()},
		Cloud:   o.Cloud,
		KubeAPI: [2]int{o.KubeAPIQPS, o.KubeAPIBurst},
	}
	logger := log.FromContext(ctx)
	for _, sc := range selected(pluginScenarios) {
		res := PluginResult{Name: sc.name, Params: sc.params(o.Sizes)}
		for _, m := range []manager{stratusCCM, stratusPlugin} {
			logger.Info("running", "scenario", sc.name, "manager", m)
			met, _, err := runOne(ctx, o, sc, m)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				if res.Errors == nil {
					res.Errors = map[string]string{}
				}
				res.Errors[string(m)] = err.Error()
				logger.Error(err, "scenario failed", "scenario", sc.name, "manager", m)
			}
			if m == stratusCCM {
				res.InProcess = met
			} else {
				res.Plugin = met
			}
		}
		res.Overhead = Metrics{}
		for k, in := range res.InProcess {
			if p, ok := res.Plugin[k]; ok && !isCheck(k) {
				res.Overhead[k] = math.Round((p-in)*1000) / 1000
			}
		}
		rep.Scenarios = append(rep.Scenarios, res)
	}
	logger.Info("measuring single calls", "calls", calls)
	overheads, err := measureCalls(ctx, o, calls)
	if err != nil {
		return nil, fmt.Errorf("single calls: %w", err)
	}
	rep.Calls = overheads
	return rep, nil
}

// startPlugin serves the provider of cloudArgs (--cloud-provider and
// --cloud-config, as startMinicloud returns them) with `stratus-ccm plugin
// serve` until ctx ends or the returned stop, and returns the manager's
// provider flags that use it.
func startPlugin(ctx context.Context, o Options, name string, cloudArgs []string) ([]string, func(), error) {
	var provider, cloudConfig string
	for _, a := range cloudArgs {
		if v, ok := strings.CutPrefix(a, "--cloud-provider="); ok {
			provider = v
		}
		if v, ok := strings.CutPrefix(a, "--cloud-config="); ok {
			cloudConfig = v
		}
	}
	// A Unix socket path is limited to about 100 bytes; WorkDir may be
	// longer.
	dir, err := os.MkdirTemp("", "plugin-")
	if err != nil {
		return nil, nil, err
	}
	socket := filepath.Join(dir, "provider.sock")
	block := filepath.Join(dir, "plugin.yaml")
	if err := os.WriteFile(block, fmt.Appendf(nil, "address: unix://%s\n", socket), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	logFile, err := os.Create(filepath.Join(o.WorkDir, name+"-plugin-serve.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, o.StratusCCM, "plugin", "serve", "--provider="+provider, "--cloud-config="+cloudConfig, "--socket="+socket)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("start plugin serve: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
		os.RemoveAll(dir)
	}
	// The manager waits for the socket itself (the plugin block's
	// connectTimeout), as in a pod whose sidecar starts with it.
	return []string{"--cloud-provider=" + plugin.ProviderType, "--cloud-config=" + block}, stop, nil
}

// measureCalls makes each provider call calls times on the minicloud
// provider itself and on a plugin client of the same provider served over a
// Unix socket, alternating, against one minicloud without latency or rate
// limit: the difference is the protocol's (encoding, the socket, decoding).
func measureCalls(ctx context.Context, o Options, calls int) ([]CallOverhead, error) {
	dir, err := os.MkdirTemp("", "plugin-calls-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	url, tokens, _, stopCloud, err := startCloud(ctx, filepath.Join(dir, "minicloud"), CloudLimits{}, nil)
	if err != nil {
		return nil, err
	}
	defer stopCloud()
	mc, err := client.New(url, tokens[1])
	if err != nil {
		return nil, err
	}
	e := &env{cloud: mc, instances: map[string]*api.Instance{}}
	listed, lbNodes := max(o.Sizes.BurstNodes, 1), max(o.Sizes.LBBurstNodes, 1)
	names := nodeNames("call", 0, listed)
	if err := e.createInstances(ctx, names); err != nil {
		return nil, err
	}
	nodes := make([]*v1.Node, 0, lbNodes)
	for _, name := range names[:min(lbNodes, len(names))] {
		inst := e.instances[name]
		nodes = append(nodes, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name, v1.LabelTopologyZone: inst.Zone}},
			Spec:       v1.NodeSpec{ProviderID: mcprovider.ProviderID(inst.ID)},
			Status: v1.NodeStatus{
				Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: inst.PrivateIP}, {Type: v1.NodeHostName, Address: name}},
				Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		})
	}

	inProcess := mcprovider.NewFromClient(mc)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addr := "unix://" + filepath.Join(dir, "provider.sock")
	served := make(chan error, 1)
	go func() {
		served <- plugin.Serve(sctx, mcprovider.NewFromClient(mc), plugin.ServeOptions{Address: addr, ProviderName: "minicloud"})
	}()
	defer func() { cancel(); <-served }()
	viaPlugin, err := plugin.Dial(ctx, plugin.Config{Address: addr, ConnectTimeout: &metav1.Duration{Duration: time.Minute}})
	if err != nil {
		return nil, err
	}
	defer viaPlugin.Close()

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "call", UID: types.UID("6f1c2a4e-0b7d-4c3e-9a51-2d8e7f6a5b4c")},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
	lb, _ := inProcess.LoadBalancer()
	if err := untilProvisioned(ctx, lb, svc, nodes); err != nil {
		return nil, err
	}

	byProviderID := nodes[0]
	byName := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodes[0].Name}}
	type callFn func(ctx context.Context, p cloudprovider.Interface) error
	v2 := func(p cloudprovider.Interface) cloudprovider.InstancesV2 { i, _ := p.InstancesV2(); return i }
	lbOf := func(p cloudprovider.Interface) cloudprovider.LoadBalancer { l, _ := p.LoadBalancer(); return l }
	kinds := []struct {
		name, size string
		fn         callFn
	}{
		{"InstanceExists", "", func(ctx context.Context, p cloudprovider.Interface) error {
			_, err := v2(p).InstanceExists(ctx, byProviderID)
			return err
		}},
		{"InstanceMetadata", "node without provider ID", func(ctx context.Context, p cloudprovider.Interface) error {
			_, err := v2(p).InstanceMetadata(ctx, byName)
			return err
		}},
		{"ListInstances", fmt.Sprintf("%d instances", listed), func(ctx context.Context, p cloudprovider.Interface) error {
			l, ok := v2(p).(stratus.InstanceLister)
			if !ok {
				return errors.New("no instance lister")
			}
			_, err := l.ListInstances(ctx)
			return err
		}},
		{"GetLoadBalancer", "", func(ctx context.Context, p cloudprovider.Interface) error {
			_, _, err := lbOf(p).GetLoadBalancer(ctx, "bench", svc)
			return err
		}},
		{"EnsureLoadBalancer", fmt.Sprintf("%d nodes", len(nodes)), func(ctx context.Context, p cloudprovider.Interface) error {
			_, err := lbOf(p).EnsureLoadBalancer(ctx, "bench", svc, nodes)
			return err
		}},
	}
	var out []CallOverhead
	for _, k := range kinds {
		in, pl := make([]time.Duration, 0, calls), make([]time.Duration, 0, calls)
		for range calls {
			for _, side := range []struct {
				p cloudprovider.Interface
				d *[]time.Duration
			}{{inProcess, &in}, {viaPlugin, &pl}} {
				start := time.Now()
				if err := k.fn(ctx, side.p); err != nil {
					return nil, fmt.Errorf("%s: %w", k.name, err)
				}
				*side.d = append(*side.d, time.Since(start))
			}
		}
		c := CallOverhead{Call: k.name, Size: k.size, Calls: calls,
			InProcessMedianMS: ms(median(in)), PluginMedianMS: ms(median(pl)), InProcessMeanMS: ms(mean(in)), PluginMeanMS: ms(mean(pl))}
		c.OverheadMedianMS = math.Round((c.PluginMedianMS-c.InProcessMedianMS)*1000) / 1000
		out = append(out, c)
	}
	return out, nil
}

// untilProvisioned ensures the load balancer until it is ready (a new one
// answers with a RetryError while it provisions).
func untilProvisioned(ctx context.Context, lb cloudprovider.LoadBalancer, svc *v1.Service, nodes []*v1.Node) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := lb.EnsureLoadBalancer(ctx, "bench", svc, nodes)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("load balancer of %s/%s not ready: %w", svc.Namespace, svc.Name, err)
		case <-time.After(poll):
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return sum / time.Duration(len(d))
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// WriteJSON writes the report to path, creating its folder.
func (r *PluginReport) WriteJSON(path string) error { return writeJSON(path, r) }

// Markdown renders the plugin report as the tables of docs/plugins.md: the
// scenarios in process and through the plugin, then the single calls.
func (r *PluginReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s on %s/%s, %d CPUs, %s. Scenarios: minicloud %g requests/s per token (burst %d), %d ms latency per request, load balancers provision in %s; --kube-api-qps=%d --kube-api-burst=%d. Single calls: a minicloud without latency or rate limit.\n\n",
		r.Date.Format("2006-01-02 15:04 UTC"), r.Machine.OS, r.Machine.Arch, r.Machine.CPUs, r.Machine.Go,
		r.Cloud.RateLimit, r.Cloud.Burst, r.Cloud.LatencyMS, r.Cloud.LBProvisionDelay, r.KubeAPI[0], r.KubeAPI[1])
	b.WriteString("| scenario | parameters | metric | in process | through the plugin | plugin − in process |\n|---|---|---|---:|---:|---:|\n")
	for _, s := range r.Scenarios {
		params := formatParams(s.Params)
		keys := slices.Sorted(maps.Keys(union(s.InProcess, s.Plugin)))
		if len(keys) == 0 {
			fmt.Fprintf(&b, "| %s | %s | — | — | — | failed: %s |\n", s.Name, params, formatErrors(s.Errors))
			continue
		}
		for _, k := range keys {
			in, okI := s.InProcess[k]
			p, okP := s.Plugin[k]
			o, okO := s.Overhead[k]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.Name, params, k, num(in, okI), num(p, okP), num(o, okO))
		}
	}
	b.WriteString("\n| call | size | calls per side | in process, median ms | through the plugin, median ms | overhead per call, median ms | in process, mean ms | through the plugin, mean ms |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.Calls {
		fmt.Fprintf(&b, "| %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f |\n", c.Call, c.Size, c.Calls,
			c.InProcessMedianMS, c.PluginMedianMS, c.OverheadMedianMS, c.InProcessMeanMS, c.PluginMeanMS)
	}
	return b.String()
}
