package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ladderServiceShare is the share of a rung's nodes that the number of its
// LoadBalancer Services is (20%).
const ladderServiceShare = 5

// ladderScenario grows one cluster through Sizes.LadderRungs nodes (each rung
// with a fifth as many LoadBalancer Services), and at each rung, once every
// node is initialized, every Service has ingress and the manager's API
// requests have paused (waitQuiet, whose wait is reported), measures the
// manager for LadderWindow while the kubelets report as they do (every 5
// minutes): its peak RSS so far (and its resident memory at the window's
// end, anonymous and file-backed), its CPU seconds and cloud calls per hour, and its
// Kubernetes API requests per hour, in total and by verb and resource, with
// the watches client-go renewed in the window apart (kubeAPIMetrics). Before
// the first rung, the memory of the manager leading the empty cluster is
// the floor ("nodes=00000"): what its binary and runtime hold before any
// object.
// A rung that fails (say, one that does not settle within the run's bound)
// ends the ladder with an error and the metrics of the rungs before it,
// which the report keeps.
//
// With --heap-profile, each rung also takes the manager's CPU profile over
// its window and its heap profile after it (files
// scale-ladder-<manager>-nodes<N>.{cpu,heap}.pb.gz); the report gets their
// summaries. The CPU profile costs the manager a little CPU of its own in
// the window it measures.
var ladderScenario = scenario{
	name:        "scale-ladder",
	heapProfile: true,
	params: func(s Sizes) map[string]any {
		return map[string]any{"nodes": formatRungs(s.LadderRungs), "servicesPerNode": "1/" + strconv.Itoa(ladderServiceShare), "window": s.LadderWindow.String()}
	},
	setup: func(context.Context, *env, Sizes) error { return nil },
	measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
		m := Metrics{}
		// The floor, "nodes=00000": the manager leading the empty cluster,
		// its binary's pages and runtime before any object.
		if err := settle(ctx, e, 0, 0); err != nil {
			return m, fmt.Errorf("empty cluster: %w", err)
		}
		if err := e.memoryMetrics(m, "nodes=00000 "); err != nil {
			return m, fmt.Errorf("empty cluster: %w", err)
		}
		nodes, services := 0, 0
		for _, rung := range s.LadderRungs {
			if rung > nodes {
				if err := e.createInitializedNodes(ctx, nodeNames("ladder", nodes, rung-nodes)); err != nil {
					return m, fmt.Errorf("at %d nodes: %w", rung, err)
				}
				nodes = rung
			}
			if want := rung / ladderServiceShare; want > services {
				if err := e.createServicesFrom(ctx, "ladder", services, want-services); err != nil {
					return m, fmt.Errorf("at %d nodes: %w", rung, err)
				}
				services = want
			}
			if err := settle(ctx, e, nodes, services); err != nil {
				return m, fmt.Errorf("at %d nodes: %w", rung, err)
			}
			quiet := e.quietWait
			cpu0, err := e.cpuSeconds()
			if err != nil {
				return m, fmt.Errorf("at %d nodes: %w", rung, err)
			}
			profile := fmt.Sprintf("%s-nodes%05d", e.profileName, rung)
			var cpuTop string
			cpuErr := make(chan error, 1)
			if e.profiler != nil {
				go func() {
					var err error
					cpuTop, err = e.profiler.cpu(ctx, profile, s.LadderWindow)
					cpuErr <- err
				}()
			} else {
				cpuErr <- nil
			}
			if _, err := e.heartbeat(ctx, nodeNames("ladder", 0, nodes), min(heartbeatPeriod, s.LadderWindow), s.LadderWindow); err != nil {
				return m, fmt.Errorf("at %d nodes: %w", rung, err)
			}
			if err := <-cpuErr; err != nil {
				return m, fmt.Errorf("at %d nodes: %w", rung, err)
			}
			cpu1, err := e.cpuSeconds()
			if err != nil {
				return m, fmt.Errorf("at %d nodes: %w", rung, err)
			}
			prefix := fmt.Sprintf("nodes=%05d ", rung)
			if err := e.memoryMetrics(m, prefix); err != nil {
				return m, fmt.Errorf("at %d nodes: %w", rung, err)
			}
			// After the RSS: serving the profile allocates in the manager.
			if e.profiler != nil {
				heap, err := e.profiler.heap(ctx, profile)
				if err != nil {
					return m, fmt.Errorf("at %d nodes: %w", rung, err)
				}
				e.heapTop += fmt.Sprintf("nodes=%05d CPU over the window (cumulative):\n%s\n\nnodes=%05d heap after the window (in use):\n%s\n\n", rung, cpuTop, rung, heap)
			}
			total, _, err := e.managerStats(ctx)
			if err != nil {
				return m, fmt.Errorf("at %d nodes: %w", rung, err)
			}
			perHour := 3600 / s.LadderWindow.Seconds()
			rm := Metrics{}
			if err := kubeAPIMetrics(e, rm, perHour); err != nil {
				return m, fmt.Errorf("at %d nodes: %w", rung, err)
			}
			m[prefix+"quietAfterIngressSeconds"] = quiet.Seconds()
			m[prefix+"cpuSecondsPerHour"] = (cpu1 - cpu0) * perHour
			m[prefix+"cloudCallsPerHour"] = float64(total) * perHour
			for k, v := range rm {
				m[prefix+k] = v
			}
		}
		return m, nil
	},
}

func formatRungs(rungs []int) string {
	parts := make([]string, len(rungs))
	for i, r := range rungs {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, "/")
}

// parseRungs reads "1000,2000,5000": increasing node counts.
func parseRungs(v string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("size ladderRungs: %q is not a list of increasing positive counts", v)
		}
		out = append(out, n)
	}
	return out, nil
}

// ladderWindowDefault is the measurement window of each rung at full size.
const ladderWindowDefault = 5 * time.Minute

// memoryMetrics adds the manager's peak RSS so far and its resident memory
// now, anonymous and file-backed, under prefix.
func (e *env) memoryMetrics(m Metrics, prefix string) error {
	rss, err := e.peakRSS()
	if err != nil {
		return err
	}
	anon, file, err := e.rssParts()
	if err != nil {
		return err
	}
	m[prefix+"peakRSSMiB"] = rss
	m[prefix+"rssAnonMiB"] = anon
	m[prefix+"rssFileMiB"] = file
	return nil
}
