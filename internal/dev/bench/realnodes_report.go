package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The pure parts of bench-realnodes: percentiles, the upstream CCM's flags
// from manager.args, the machine's load, and the report's tables.

// Managers bench-realnodes compares.
const (
	RealNodesStratus  = "stratus"
	RealNodesUpstream = "upstream"
)

// RealNodesReport is bench/results/realnodes.json.
type RealNodesReport struct {
	Date    time.Time `json:"date"`
	Commit  string    `json:"commit"`
	Machine Machine   `json:"machine"`
	// Services is how many LoadBalancer Services each manager got, created
	// at Rate per second; Nodes is how many real nodes ran before one was
	// added.
	Services int     `json:"services"`
	Rate     float64 `json:"servicesPerSecond"`
	Nodes    int     `json:"nodes"`
	// Duration is the whole run's wall time, both managers and their
	// environments included.
	Duration Seconds            `json:"durationSeconds"`
	Managers []RealNodesManager `json:"managers"`
}

// Seconds is a duration written as seconds.
type Seconds float64

// RealNodesManager is one manager's run on an environment of its own.
type RealNodesManager struct {
	Name string `json:"name"`
	// Load is the machine's load average (1, 5, 15 minutes) when the
	// manager's measurements started and when they ended.
	LoadBefore [3]float64 `json:"loadBefore"`
	LoadAfter  [3]float64 `json:"loadAfter"`
	// Creation is per Service: created → ingress address answering through
	// kube-proxy from a pod; Ingress is created → ingress IP in its status.
	Creation Latencies `json:"serviceCreation"`
	Ingress  Latencies `json:"ingressAssigned"`
	// NodeAdd is per load balancer: the new Node registered → the node's
	// IP among the load balancer's targets in minicloud; NodeAddReady the
	// same from the moment the Node was Ready and initialized.
	NodeAdd      Latencies `json:"nodeAdd"`
	NodeAddReady Latencies `json:"nodeAddFromReady"`
	// NodeJoin is the new node's registration → Ready and initialized.
	NodeJoin Seconds `json:"nodeJoinSeconds"`
	// NodeRemove is per load balancer: the Node deleted → its IP gone from
	// the load balancer's targets.
	NodeRemove Latencies `json:"nodeRemove"`
	// Duration is this manager's wall time, environment included.
	Duration Seconds `json:"durationSeconds"`
	// Error, when set, is why the run stopped early; the latencies hold
	// what was measured until then.
	Error string `json:"error,omitempty"`
}

// Latencies are samples in seconds and their summary.
type Latencies struct {
	// Samples holds one value per Service or load balancer that got there;
	// Missing counts those that did not before the deadline.
	Samples []float64 `json:"samples"`
	Missing int       `json:"missing"`
	P50     float64   `json:"p50"`
	P90     float64   `json:"p90"`
	P99     float64   `json:"p99"`
	Max     float64   `json:"max"`
}

// NewLatencies summarizes samples (seconds, rounded to milliseconds).
func NewLatencies(samples []float64, missing int) Latencies {
	s := slices.Clone(samples)
	slices.Sort(s)
	for i := range s {
		s[i] = math.Round(s[i]*1000) / 1000
	}
	l := Latencies{Samples: s, Missing: missing}
	if s == nil {
		l.Samples = []float64{}
	}
	l.P50, l.P90, l.P99 = Percentile(s, 50), Percentile(s, 90), Percentile(s, 99)
	if len(s) > 0 {
		l.Max = s[len(s)-1]
	}
	return l
}

// Percentile is the nearest-rank p-th percentile of sorted (the smallest
// value with at least p% of the values at or below it); 0 for no values.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// UpstreamCCMArgs turns the flags stratus dev --no-manager writes
// (manager.args, one a line) into the upstream CCM's: without the flags
// only stratus-ccm has (--config and --node-deletion-grace-period), with
// the cloud-config the chart gives stratus-ccm (cloudConfig, written by the
// caller: the original plus clusterHealthCheck: kubeProxy), the kubeconfig
// for delegated authentication and authorization, and the controllers under
// the manager's own identity. It returns the args and the path of the
// original cloud-config.
func UpstreamCCMArgs(managerArgs, cloudConfig string) (args []string, origCloudConfig string, err error) {
	var kubeconfig string
	for _, line := range strings.Split(managerArgs, "\n") {
		arg := strings.TrimSpace(line)
		switch {
		case arg == "":
		case strings.HasPrefix(arg, "--config="), strings.HasPrefix(arg, "--node-deletion-grace-period="):
		case strings.HasPrefix(arg, "--cloud-config="):
			origCloudConfig = strings.TrimPrefix(arg, "--cloud-config=")
			args = append(args, "--cloud-config="+cloudConfig)
		case strings.HasPrefix(arg, "--kubeconfig="):
			kubeconfig = strings.TrimPrefix(arg, "--kubeconfig=")
			args = append(args, arg)
		default:
			args = append(args, arg)
		}
	}
	if kubeconfig == "" {
		return nil, "", fmt.Errorf("manager.args has no --kubeconfig")
	}
	if origCloudConfig == "" {
		return nil, "", fmt.Errorf("manager.args has no --cloud-config")
	}
	args = append(args,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--use-service-account-credentials=false",
		"--v=2")
	return args, origCloudConfig, nil
}

// ParseLoadAvg reads the three load averages of /proc/loadavg's content.
func ParseLoadAvg(content string) ([3]float64, error) {
	var out [3]float64
	f := strings.Fields(content)
	if len(f) < 3 {
		return out, fmt.Errorf("loadavg %q: want three numbers first", content)
	}
	for i := range 3 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return out, fmt.Errorf("loadavg %q: %w", content, err)
		}
		out[i] = v
	}
	return out, nil
}

// WriteJSON writes the report to path, creating its folder.
func (r *RealNodesReport) WriteJSON(path string) error { return writeJSON(path, r) }

// Manager returns the named manager's run, if the report has it.
func (r *RealNodesReport) Manager(name string) (RealNodesManager, bool) {
	for _, m := range r.Managers {
		if m.Name == name {
			return m, true
		}
	}
	return RealNodesManager{}, false
}

// Markdown renders the report: one table of percentiles per measurement,
// both managers and the ratio upstream/stratus.
func (r *RealNodesReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Latency on real nodes (%s, commit %s)\n\n", r.Date.UTC().Format("2006-01-02 15:04 MST"), r.Commit)
	fmt.Fprintf(&b, "%d LoadBalancer Services created at %g/s, %d real nodes, then one node added and one removed; %d CPUs; the run took %s.\n\n",
		r.Services, r.Rate, r.Nodes, r.Machine.CPUs, time.Duration(float64(r.Duration)*float64(time.Second)).Round(time.Second))
	fmt.Fprintln(&b, "| manager | load average at start (1/5/15 min) | at end | took |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	for _, m := range r.Managers {
		fmt.Fprintf(&b, "| %s | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %s |\n", m.Name,
			m.LoadBefore[0], m.LoadBefore[1], m.LoadBefore[2], m.LoadAfter[0], m.LoadAfter[1], m.LoadAfter[2],
			time.Duration(float64(m.Duration)*float64(time.Second)).Round(time.Second))
	}
	b.WriteString("\n")
	tables := []struct {
		title string
		get   func(RealNodesManager) Latencies
	}{
		{"ServiceCreationLatency: created → ingress answers from a pod (per Service)", func(m RealNodesManager) Latencies { return m.Creation }},
		{"created → ingress IP in the Service's status (per Service)", func(m RealNodesManager) Latencies { return m.Ingress }},
		{"LoadBalancerNodeSyncLatency, node added: Node registered → in the load balancer's targets (per load balancer)", func(m RealNodesManager) Latencies { return m.NodeAdd }},
		{"node added, from the Node Ready and initialized → in the targets (per load balancer)", func(m RealNodesManager) Latencies { return m.NodeAddReady }},
		{"LoadBalancerNodeSyncLatency, node removed: Node deleted → out of the load balancer's targets (per load balancer)", func(m RealNodesManager) Latencies { return m.NodeRemove }},
	}
	up, hasUp := r.Manager(RealNodesUpstream)
	st, hasSt := r.Manager(RealNodesStratus)
	for _, t := range tables {
		fmt.Fprintf(&b, "## %s\n\n", t.title)
		fmt.Fprintln(&b, "| manager | n | missing | p50 (s) | p90 (s) | p99 (s) | max (s) |")
		fmt.Fprintln(&b, "|---|---|---|---|---|---|---|")
		for _, m := range r.Managers {
			l := t.get(m)
			fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %.2f | %.2f | %.2f |\n", m.Name, len(l.Samples), l.Missing, l.P50, l.P90, l.P99, l.Max)
		}
		if hasUp && hasSt {
			u, s := t.get(up), t.get(st)
			fmt.Fprintf(&b, "| upstream/stratus | | | %s | %s | %s | %s |\n", ratio(u.P50, s.P50), ratio(u.P90, s.P90), ratio(u.P99, s.P99), ratio(u.Max, s.Max))
		}
		b.WriteString("\n")
	}
	for _, m := range r.Managers {
		if m.NodeJoin > 0 {
			fmt.Fprintf(&b, "- %s: the added node took %.1f s from registration to Ready and initialized.\n", m.Name, float64(m.NodeJoin))
		}
		if m.Error != "" {
			fmt.Fprintf(&b, "- %s stopped early: %s\n", m.Name, m.Error)
		}
	}
	return b.String()
}

// ratio is a/b with two decimals, or "–" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
