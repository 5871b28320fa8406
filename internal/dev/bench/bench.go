// Package bench measures stratus-ccm side by side with the upstream
// cloud-controller-manager (hack/kubebins' "ccm", the same providers/minicloud
// compiled into k8s.io/cloud-provider's app): same machine, same run, same
// minicloud limits, same --kube-api-qps/burst.
//
// Every scenario runs once per manager, each time on a fresh control plane
// (etcd + kube-apiserver from hack/kubebins) and a fresh in-process minicloud.
// Nodes are registered as kubelet --cloud-provider=external registers them
// (uninitialized taint, hostname address, Ready) directly through the API: no
// kube-controller-manager runs, so nothing marks them NotReady and no
// heartbeat traffic is needed. Results are ratios from one run (upstream /
// stratus, so higher is better for stratus); nothing here asserts speed.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Sizes are the scenario parameters.
type Sizes struct {
	// BurstNodes join at once in node-init-burst.
	BurstNodes int `json:"burstNodes"`
	// SteadyNodes and SteadyServices exist during steady-state, which
	// counts cloud calls over SteadyWindow.
	SteadyNodes    int           `json:"steadyNodes"`
	SteadyServices int           `json:"steadyServices"`
	SteadyWindow   time.Duration `json:"steadyWindow"`
	// LBBurstServices are created at once in lb-burst, on LBBurstNodes.
	LBBurstNodes    int `json:"lbBurstNodes"`
	LBBurstServices int `json:"lbBurstServices"`
	// ChurnServices exist when ChurnNodes join in node-churn.
	ChurnServices int `json:"churnServices"`
	ChurnNodes    int `json:"churnNodes"`
	// MemoryNodes and MemoryServices exist when memory reads peak RSS: once
	// every Service has ingress, or MemoryWait after they were created,
	// whichever comes first.
	MemoryNodes    int           `json:"memoryNodes"`
	MemoryServices int           `json:"memoryServices"`
	MemoryWait     time.Duration `json:"memoryWait"`
	// VSphereBurstNodes VMs' kubelets register at once in
	// vsphere-node-init-burst; VSphereSteadyNodes initialized nodes exist
	// during vsphere-steady-state, which counts vCenter requests over
	// SteadyWindow.
	VSphereBurstNodes  int `json:"vsphereBurstNodes"`
	VSphereSteadyNodes int `json:"vsphereSteadyNodes"`
	// The openstack-* scenarios: OpenStackBurstNodes register at once;
	// OpenStackSteadyNodes initialized nodes exist during the steady state
	// (over SteadyWindow); OpenStackLBServices Services, each with a
	// floating IP, are created at once on OpenStackLBNodes;
	// OpenStackChurnNodes join while OpenStackChurnServices exist.
	OpenStackBurstNodes    int `json:"openstackBurstNodes"`
	OpenStackSteadyNodes   int `json:"openstackSteadyNodes"`
	OpenStackLBNodes       int `json:"openstackLbNodes"`
	OpenStackLBServices    int `json:"openstackLbServices"`
	OpenStackChurnServices int `json:"openstackChurnServices"`
	OpenStackChurnNodes    int `json:"openstackChurnNodes"`
	// LadderRungs are the node counts scale-ladder grows through (each
	// with a fifth as many LoadBalancer Services), measuring each for
	// LadderWindow.
	LadderRungs  []int         `json:"ladderRungs"`
	LadderWindow time.Duration `json:"ladderWindow"`
}

// FullSizes are the sizes of the issue (make bench).
var FullSizes = Sizes{
	BurstNodes:  1000,
	SteadyNodes: 5000, SteadyServices: 200, SteadyWindow: 10 * time.Minute,
	LBBurstNodes: 20, LBBurstServices: 500,
	ChurnServices: 200, ChurnNodes: 50,
	MemoryNodes: 5000, MemoryServices: 1000, MemoryWait: 10 * time.Minute,
	VSphereBurstNodes: 1000, VSphereSteadyNodes: 2000,
	OpenStackBurstNodes: 1000, OpenStackSteadyNodes: 2000,
	OpenStackLBNodes: 20, OpenStackLBServices: 200,
	OpenStackChurnServices: 200, OpenStackChurnNodes: 50,
	LadderRungs: []int{1000, 2000, 5000, 10000}, LadderWindow: ladderWindowDefault,
}

// QuickSizes run all five scenarios in a few minutes (make bench-quick).
var QuickSizes = Sizes{
	BurstNodes:  30,
	SteadyNodes: 30, SteadyServices: 5, SteadyWindow: 20 * time.Second,
	LBBurstNodes: 3, LBBurstServices: 10,
	ChurnServices: 5, ChurnNodes: 3,
	MemoryNodes: 30, MemoryServices: 10, MemoryWait: time.Minute,
	VSphereBurstNodes: 20, VSphereSteadyNodes: 30,
	OpenStackBurstNodes: 20, OpenStackSteadyNodes: 30,
	OpenStackLBNodes: 3, OpenStackLBServices: 5,
	OpenStackChurnServices: 3, OpenStackChurnNodes: 3,
	LadderRungs: []int{30, 60}, LadderWindow: 20 * time.Second,
}

// Set overrides one size, "name=value" with the name of its JSON field
// (e.g. "lbBurstServices=100", "steadyWindow=5m").
func (s *Sizes) Set(kv string) error {
	name, value, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("size %q: want name=value", kv)
	}
	if name == "ladderRungs" {
		rungs, err := parseRungs(value)
		if err != nil {
			return err
		}
		s.LadderRungs = rungs
		return nil
	}
	if d, ok := map[string]*time.Duration{"steadyWindow": &s.SteadyWindow, "memoryWait": &s.MemoryWait, "ladderWindow": &s.LadderWindow}[name]; ok {
		v, err := time.ParseDuration(value)
		if err != nil || v <= 0 {
			return fmt.Errorf("size %s: %q is not a positive duration", name, value)
		}
		*d = v
		return nil
	}
	fields := map[string]*int{
		"burstNodes": &s.BurstNodes, "steadyNodes": &s.SteadyNodes, "steadyServices": &s.SteadyServices,
		"lbBurstNodes": &s.LBBurstNodes, "lbBurstServices": &s.LBBurstServices,
		"churnServices": &s.ChurnServices, "churnNodes": &s.ChurnNodes,
		"memoryNodes": &s.MemoryNodes, "memoryServices": &s.MemoryServices,
		"vsphereBurstNodes": &s.VSphereBurstNodes, "vsphereSteadyNodes": &s.VSphereSteadyNodes,
		"openstackBurstNodes": &s.OpenStackBurstNodes, "openstackSteadyNodes": &s.OpenStackSteadyNodes,
		"openstackLbNodes": &s.OpenStackLBNodes, "openstackLbServices": &s.OpenStackLBServices,
		"openstackChurnServices": &s.OpenStackChurnServices, "openstackChurnNodes": &s.OpenStackChurnNodes,
	}
	f, ok := fields[name]
	if !ok {
		return fmt.Errorf("size %q: unknown name (one of steadyWindow, memoryWait, ladderWindow, ladderRungs, %s)", name, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		return fmt.Errorf("size %s: %q is not a count", name, value)
	}
	*f = n
	return nil
}

// Options configure Run.
type Options struct {
	// BinDir holds etcd, kube-apiserver and the upstream "ccm" (hack/kubebins).
	BinDir string
	// StratusCCM is the stratus-ccm binary.
	StratusCCM string
	// WorkDir holds the control planes' files (a temporary folder when empty).
	WorkDir string
	// Sizes are the scenario parameters.
	Sizes Sizes
	// Scenarios selects scenarios by name (all when empty).
	Scenarios []string
	// Managers selects "upstream", "stratus" or both (when empty). Runs of
	// one side are for investigating; the report then has no ratios.
	Managers []string
	// Cloud are the minicloud limits both managers face.
	Cloud CloudLimits
	// Mode is which flags both managers get: ModeDefaults (none: each
	// manager's defaults), ModeTuned (TunedFlags), or "" (KubeAPIQPS and
	// KubeAPIBurst as --kube-api-qps/burst).
	Mode string
	// KubeAPIQPS and KubeAPIBurst are both managers' --kube-api-qps/burst
	// when Mode is "".
	KubeAPIQPS   int
	KubeAPIBurst int
	// Repeats is how often each short scenario (node-init-burst, lb-burst,
	// node-churn) runs per manager; the report has the median and the
	// range. Default 1.
	Repeats int
	// Timeout bounds each scenario run (per manager).
	Timeout time.Duration
	// HeapProfileDir, when set, is where the memory scenario writes each
	// manager's heap profile (<scenario>-<manager>.heap.pb.gz), taken
	// through its /debug/pprof/ once its peak RSS is read; the report gets
	// each profile's summary (Result.HeapProfiles). Both managers then serve
	// their secure port on 127.0.0.1 instead of nothing.
	HeapProfileDir string
	// Progress, when set, gets the report so far after each scenario, so a
	// long run that is stopped keeps what it measured.
	Progress func(*Report)
}

// CloudLimits are minicloud's limits in a benchmark.
type CloudLimits struct {
	// RateLimit is requests per second per token; Burst the bucket size.
	RateLimit float64 `json:"rateLimit"`
	Burst     int     `json:"burst"`
	// LatencyMS is added to every API request.
	LatencyMS int `json:"latencyMs"`
	// LBProvisionDelay is how long a new load balancer provisions.
	LBProvisionDelay time.Duration `json:"lbProvisionDelay"`
	// VSphereLatencyMS is added to every request to the simulated vCenter
	// of the vSphere scenarios, standing in for a real vCenter's latency.
	VSphereLatencyMS int `json:"vsphereLatencyMs"`
	// OpenStackProvisionDelay is how long a new Octavia load balancer of the
	// openstack-* scenarios stays PENDING_CREATE (minicloud's provisioning
	// delay there); OpenStackPendingDelay how long one stays PENDING_UPDATE
	// after each change (and PENDING_DELETE).
	OpenStackProvisionDelay time.Duration `json:"openstackProvisionDelay,omitempty"`
	OpenStackPendingDelay   time.Duration `json:"openstackPendingDelay,omitempty"`
}

// Modes of Options.Mode.
const (
	ModeDefaults = "defaults"
	ModeTuned    = "tuned"
)

// DefaultCloud are the limits of the benchmark design (docs/benchmarks.md).
var DefaultCloud = CloudLimits{
	RateLimit: 20, Burst: 40, LatencyMS: 20, LBProvisionDelay: 2 * time.Second, VSphereLatencyMS: 20,
	OpenStackProvisionDelay: 3 * time.Second, OpenStackPendingDelay: time.Second,
}

// Report is bench/results/latest.json.
type Report struct {
	Date    time.Time   `json:"date"`
	Machine Machine     `json:"machine"`
	Cloud   CloudLimits `json:"cloud"`
	KubeAPI [2]int      `json:"kubeApiQpsBurst"`
	// Mode is Options.Mode ("" when both got KubeAPI).
	Mode      string   `json:"mode,omitempty"`
	Scenarios []Result `json:"scenarios"`
}

// Machine describes where the numbers were taken.
type Machine struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	CPUs int    `json:"cpus"`
	Go   string `json:"go"`
}

// Metrics are one manager's numbers in one scenario (seconds, calls, MiB).
type Metrics map[string]float64

// Result is one scenario for both managers.
type Result struct {
	Name string `json:"name"`
	// Date is when the scenario ran (a merged report holds several runs).
	Date     time.Time      `json:"date,omitzero"`
	Params   map[string]any `json:"params"`
	Stratus  Metrics        `json:"stratus"`
	Upstream Metrics        `json:"upstream"`
	// Ratio is upstream / stratus per metric: higher is better for stratus.
	// A metric that is 0 for stratus has no ratio.
	Ratio Metrics `json:"ratio"`
	// Errors say why a side has no numbers.
	Errors map[string]string `json:"errors,omitempty"`
	// Runs is how often the scenario ran per manager; with more than one,
	// each metric is the median and Range has [min, max] per manager.
	Runs  int                              `json:"runs,omitempty"`
	Range map[string]map[string][2]float64 `json:"range,omitempty"`
	// HeapProfiles are, per manager, the summary of its heap profile at the
	// scenario's peak (`go tool pprof -top` by in-use bytes), when one was
	// taken (Options.HeapProfileDir); for the scale ladder, of its CPU
	// profile over each rung's window and its heap profile after it.
	HeapProfiles map[string]string `json:"heapProfiles,omitempty"`
}

// Run runs the selected scenarios for both managers and returns the report.
// A scenario that fails for one manager is reported with the error; Run
// returns an error only when it cannot start at all.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Timeout == 0 {
		o.Timeout = 15 * time.Minute
	}
	if o.KubeAPIQPS == 0 {
		o.KubeAPIQPS, o.KubeAPIBurst = 20, 30
	}
	if o.Mode != "" && o.Mode != ModeDefaults && o.Mode != ModeTuned {
		return nil, fmt.Errorf("bench mode %q: want %q or %q", o.Mode, ModeDefaults, ModeTuned)
	}
	o.Repeats = max(o.Repeats, 1)
	need := []string{filepath.Join(o.BinDir, "etcd"), filepath.Join(o.BinDir, "kube-apiserver"), o.StratusCCM}
	for _, sc := range selected(o.Scenarios) {
		upstreamCCM := filepath.Join(o.BinDir, "ccm")
		switch sc.cloud {
		case vsphereCloud:
			upstreamCCM = filepath.Join(o.BinDir, "vsphere-ccm")
		case openstackCloud:
			upstreamCCM = filepath.Join(o.BinDir, "openstack-ccm")
		}
		if !slices.Contains(need, upstreamCCM) {
			need = append(need, upstreamCCM)
		}
	}
	for _, bin := range need {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("bench needs %s: %w (make kubebins kubebins-vsphere kubebins-openstack build)", bin, err)
		}
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "stratus-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.WorkDir = dir
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	rep := &Report{
		Date:    time.Now().UTC(),
		Machine: Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()},
		Cloud:   o.Cloud,
		KubeAPI: [2]int{o.KubeAPIQPS, o.KubeAPIBurst},
		Mode:    o.Mode,
	}
	logger := log.FromContext(ctx)
	for _, sc := range selected(o.Scenarios) {
		res := Result{Name: sc.name, Date: time.Now().UTC(), Params: sc.params(o.Sizes), Runs: 1}
		if sc.short {
			res.Runs = o.Repeats
		}
		for _, m := range []manager{upstream, stratusCCM} {
			if len(o.Managers) > 0 && !slices.Contains(o.Managers, string(m)) {
				continue
			}
			var runs []Metrics
			for run := range res.Runs {
				logger.Info("running", "scenario", sc.name, "manager", m, "run", run+1, "of", res.Runs)
				met, heapTop, err := runOne(ctx, o, sc, m)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if heapTop != "" {
					if res.HeapProfiles == nil {
						res.HeapProfiles = map[string]string{}
					}
					res.HeapProfiles[string(m)] = heapTop
				}
				if err != nil {
					if res.Errors == nil {
						res.Errors = map[string]string{}
					}
					res.Errors[string(m)] = err.Error()
					logger.Error(err, "scenario failed", "scenario", sc.name, "manager", m)
					// What a scenario measured before it failed (the
					// ladder's earlier rungs) is kept, beside the error.
					if len(met) > 0 {
						runs = append(runs, met)
					}
					continue
				}
				runs = append(runs, met)
			}
			met, spread := medianRuns(runs)
			if len(runs) > 1 {
				if res.Range == nil {
					res.Range = map[string]map[string][2]float64{}
				}
				res.Range[string(m)] = spread
			}
			if m == upstream {
				res.Upstream = met
			} else {
				res.Stratus = met
			}
		}
		res.Ratio = ratios(res.Upstream, res.Stratus)
		rep.Scenarios = append(rep.Scenarios, res)
		if o.Progress != nil {
			o.Progress(rep)
		}
	}
	return rep, nil
}

// medianRuns returns each metric's median over runs (the mean of the middle
// two for an even count) and its [min, max]; a metric some run lacks is
// taken over the runs that have it. No runs: nil.
func medianRuns(runs []Metrics) (Metrics, map[string][2]float64) {
	if len(runs) == 0 {
		return nil, nil
	}
	vals := map[string][]float64{}
	for _, r := range runs {
		for k, v := range r {
			vals[k] = append(vals[k], v)
		}
	}
	med, spread := Metrics{}, map[string][2]float64{}
	for k, vs := range vals {
		slices.Sort(vs)
		n := len(vs)
		med[k] = (vs[(n-1)/2] + vs[n/2]) / 2
		spread[k] = [2]float64{vs[0], vs[n-1]}
	}
	return med, spread
}

// checkPrefix starts the names of metrics that describe the run rather than
// the manager (how many load balancers exist at the end, how many kubelet
// reports the harness made): they are reported for both sides so a reader
// can check the runs were alike, but have no ratio.
const checkPrefix = "check: "

// isCheck tells a check row, also one of a ladder rung ("nodes=01000
// check: …").
func isCheck(k string) bool { return strings.Contains(k, checkPrefix) }

func ratios(up, st Metrics) Metrics {
	r := Metrics{}
	for k, u := range up {
		if isCheck(k) {
			continue
		}
		if s, ok := st[k]; ok && s != 0 {
			r[k] = math.Round(u/s*100) / 100
		}
	}
	return r
}

// ReadReport reads a report WriteJSON wrote.
func ReadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Merge replaces r's results of the scenarios newer has (by name) with
// newer's, and appends the others: a re-run of some scenarios updates a
// report of all. Each result keeps its own date; the report's date becomes
// newer's.
func (r *Report) Merge(newer *Report) {
	for _, res := range newer.Scenarios {
		i := slices.IndexFunc(r.Scenarios, func(o Result) bool { return o.Name == res.Name })
		if i < 0 {
			r.Scenarios = append(r.Scenarios, res)
			continue
		}
		r.Scenarios[i] = res
	}
	r.Date = newer.Date
}

// WriteJSON writes the report to path, creating its folder.
func (r *Report) WriteJSON(path string) error { return writeJSON(path, r) }

// writeJSON writes v, indented, to path, creating its folder.
func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
