package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// scenario is one benchmark. setup runs before the manager starts (objects
// that already exist when it comes up); measure runs while it runs.
type scenario struct {
	name string
	// cloud is "" for minicloud, or vsphereCloud; vms is how many VMs a
	// vSphere scenario's simulated vCenter starts with.
	cloud string
	vms   func(Sizes) int

	params  func(Sizes) map[string]any
	setup   func(ctx context.Context, e *env, s Sizes) error
	measure func(ctx context.Context, e *env, s Sizes) (Metrics, error)
}

// Names are the scenario names, in run order.
func Names() []string {
	var out []string
	for _, sc := range allScenarios() {
		out = append(out, sc.name)
	}
	return out
}

// allScenarios are the minicloud scenarios, then the vSphere ones.
func allScenarios() []scenario { return append(slices.Clone(scenarios), vsphereScenarios...) }

func selected(names []string) []scenario {
	if len(names) == 0 {
		return allScenarios()
	}
	var out []scenario
	for _, sc := range allScenarios() {
		if slices.Contains(names, sc.name) {
			out = append(out, sc)
		}
	}
	return out
}

// nodeNames returns count node names starting at from.
func nodeNames(prefix string, from, count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, from+i)
	}
	return out
}

// callMetrics adds the manager's cloud calls since the last reset, in total
// and per operation ("cloudCalls GET /v1/instances").
func callMetrics(ctx context.Context, e *env, m Metrics) error {
	total, ops, err := e.managerStats(ctx)
	if err != nil {
		return err
	}
	m["cloudCalls"] = float64(total)
	for op, n := range ops {
		m["cloudCalls "+op] = float64(n)
	}
	return nil
}

// settle waits until nodes Nodes are initialized and services Services have
// ingress, then zeroes the cloud's call counts.
func settle(ctx context.Context, e *env, nodes, services int) error {
	if err := e.waitInitialized(ctx, nodes); err != nil {
		return err
	}
	if err := e.waitIngress(ctx, services); err != nil {
		return err
	}
	return e.cloud.ResetStats(ctx)
}

// settleWithServices waits until nodes Nodes are initialized, then creates
// services LoadBalancer Services and waits until all have ingress, then
// zeroes the cloud's call counts. Services come after the Nodes so that the
// preparation does not depend on how a manager handles node changes while
// load balancers provision (node-churn measures that).
func settleWithServices(ctx context.Context, e *env, nodes int, prefix string, services int) error {
	if err := e.waitInitialized(ctx, nodes); err != nil {
		return err
	}
	if err := e.createServices(ctx, prefix, services); err != nil {
		return err
	}
	return settle(ctx, e, nodes, services)
}

var scenarios = []scenario{
	{
		name:   "node-init-burst",
		params: func(s Sizes) map[string]any { return map[string]any{"nodes": s.BurstNodes} },
		// The machines exist; their kubelets register all at once.
		setup: func(ctx context.Context, e *env, s Sizes) error {
			return e.createInstances(ctx, nodeNames("burst", 0, s.BurstNodes))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			if err := e.cloud.ResetStats(ctx); err != nil {
				return nil, err
			}
			start := time.Now()
			if err := e.registerNodes(ctx, nodeNames("burst", 0, s.BurstNodes)); err != nil {
				return nil, err
			}
			if err := e.waitInitialized(ctx, s.BurstNodes); err != nil {
				return nil, err
			}
			m := Metrics{"secondsToAllInitialized": time.Since(start).Seconds()}
			return m, callMetrics(ctx, e, m)
		},
	},
	{
		name: "steady-state",
		params: func(s Sizes) map[string]any {
			return map[string]any{"nodes": s.SteadyNodes, "services": s.SteadyServices, "window": s.SteadyWindow.String()}
		},
		// A cluster that has run for a while: the Nodes are initialized.
		setup: func(ctx context.Context, e *env, s Sizes) error {
			return e.createInitializedNodes(ctx, nodeNames("steady", 0, s.SteadyNodes))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			if err := settleWithServices(ctx, e, s.SteadyNodes, "steady", s.SteadyServices); err != nil {
				return nil, err
			}
			// The window itself, with the kubelets' status reports.
			beats, err := e.heartbeat(ctx, nodeNames("steady", 0, s.SteadyNodes), min(heartbeatPeriod, s.SteadyWindow), s.SteadyWindow)
			if err != nil {
				return nil, err
			}
			total, ops, err := e.managerStats(ctx)
			if err != nil {
				return nil, err
			}
			perHour := 3600 / s.SteadyWindow.Seconds()
			m := Metrics{"cloudCallsPerHour": float64(total) * perHour, checkPrefix + "node status reports by the harness": float64(beats)}
			for op, n := range ops {
				m["cloudCallsPerHour "+op] = float64(n) * perHour
			}
			return m, nil
		},
	},
	{
		name: "lb-burst",
		params: func(s Sizes) map[string]any {
			return map[string]any{"nodes": s.LBBurstNodes, "services": s.LBBurstServices}
		},
		setup: func(ctx context.Context, e *env, s Sizes) error {
			return e.createNodes(ctx, nodeNames("lbburst", 0, s.LBBurstNodes))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			if err := settle(ctx, e, s.LBBurstNodes, 0); err != nil {
				return nil, err
			}
			start := time.Now()
			if err := e.createServices(ctx, "lbburst", s.LBBurstServices); err != nil {
				return nil, err
			}
			if err := e.waitIngress(ctx, s.LBBurstServices); err != nil {
				return nil, err
			}
			m := Metrics{"secondsToAllIngress": time.Since(start).Seconds()}
			lbs, err := e.loadBalancerCount(ctx)
			if err != nil {
				return nil, err
			}
			m[checkPrefix+"load balancers in the cloud at the end"] = float64(lbs)
			return m, callMetrics(ctx, e, m)
		},
	},
	{
		name: "node-churn",
		params: func(s Sizes) map[string]any {
			return map[string]any{"initialNodes": churnBase, "services": s.ChurnServices, "joiningNodes": s.ChurnNodes}
		},
		setup: func(ctx context.Context, e *env, s Sizes) error {
			if err := e.createInstances(ctx, nodeNames("churn", churnBase, s.ChurnNodes)); err != nil {
				return err
			}
			return e.createNodes(ctx, nodeNames("churn", 0, churnBase))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			if err := settleWithServices(ctx, e, churnBase, "churn", s.ChurnServices); err != nil {
				return nil, err
			}
			if err := e.waitTargets(ctx, s.ChurnServices, churnBase); err != nil {
				return nil, err
			}
			if err := e.cloud.ResetStats(ctx); err != nil {
				return nil, err
			}
			start := time.Now()
			if err := e.registerNodes(ctx, nodeNames("churn", churnBase, s.ChurnNodes)); err != nil {
				return nil, err
			}
			if err := e.waitTargets(ctx, s.ChurnServices, churnBase+s.ChurnNodes); err != nil {
				return nil, err
			}
			m := Metrics{"secondsToAllBackends": time.Since(start).Seconds()}
			_, ops, err := e.managerStats(ctx)
			if err != nil {
				return nil, err
			}
			m["lbUpdateCalls"] = float64(ops["PUT /v1/load-balancers/{id}"])
			return m, callMetrics(ctx, e, m)
		},
	},
	{
		name: "memory",
		params: func(s Sizes) map[string]any {
			return map[string]any{"nodes": s.MemoryNodes, "services": s.MemoryServices, "waitAtMost": s.MemoryWait.String()}
		},
		setup: func(ctx context.Context, e *env, s Sizes) error {
			return e.createInitializedNodes(ctx, nodeNames("mem", 0, s.MemoryNodes))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			if err := e.waitInitialized(ctx, s.MemoryNodes); err != nil {
				return nil, err
			}
			if err := e.createServices(ctx, "mem", s.MemoryServices); err != nil {
				return nil, err
			}
			// A manager that cannot provision them all in MemoryWait is
			// measured then, with how far it got.
			wctx, cancel := context.WithTimeout(ctx, s.MemoryWait)
			err := e.waitIngress(wctx, s.MemoryServices)
			cancel()
			if err != nil && ctx.Err() != nil {
				return nil, err
			}
			rss, err := e.peakRSS()
			if err != nil {
				return nil, err
			}
			// A busy API server may time a request out: try for a minute.
			var ready int
			lctx, cancel := context.WithTimeout(ctx, time.Minute)
			err = e.until(lctx, "the count of services with ingress", func(ctx context.Context) (bool, error) {
				n, err := e.servicesWithIngress(ctx)
				ready = n
				return err == nil, nil
			})
			cancel()
			if err != nil {
				return nil, err
			}
			return Metrics{"peakRSSMiB": rss, checkPrefix + "services with ingress when measured": float64(ready)}, nil
		},
	},
}

// heartbeatPeriod is how often a kubelet reports an unchanged node status
// (--node-status-report-frequency's default).
const heartbeatPeriod = 5 * time.Minute

// churnBase is how many nodes exist before node-churn's nodes join.
const churnBase = 3
