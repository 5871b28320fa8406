package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// scenario is one benchmark. setup runs before the manager starts (objects
// that already exist when it comes up); measure runs while it runs.
type scenario struct {
	name string
	// cloud is "" for minicloud, vsphereCloud or openstackCloud; vms is how many VMs a
	// vSphere scenario's simulated vCenter starts with.
	cloud string
	vms   func(Sizes) int
	// short scenarios run Options.Repeats times.
	short bool
	// heapProfile scenarios take the manager's heap profile when
	// Options.HeapProfileDir is set.
	heapProfile bool
	// stratusCloudConfig are cloud-config lines stratus gets besides the
	// scenario's (upstream gets the scenario's alone): a stratus feature
	// the provider offers on request, measured against upstream as it is.
	stratusCloudConfig string

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

// allScenarios are the minicloud scenarios, the scale ladder, then the
// vSphere and the OpenStack ones.
func allScenarios() []scenario {
	return slices.Concat(scenarios, []scenario{ladderScenario}, vsphereScenarios, openstackScenarios)
}

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
	opMetrics(m, "cloudCalls", total, ops, 1)
	if err := apiserverMetrics(ctx, e, m); err != nil {
		return err
	}
	return kubeAPIMetrics(e, m, 1)
}

// kubeAPIMetrics adds the manager's Kubernetes API requests since the last
// resetCounts, as the API server's audit log counted them, scaled by scale
// (1 for totals, 3600/window for an hourly rate): in total and by verb and
// resource ("kubeAPIRequests patch services/status").
//
// In a window (scale other than 1) the watches are counted apart, as a
// check row (watchesInWindow): a manager does not choose when it starts one.
// client-go ends every watch after a random 5 to 10 minutes and starts the
// next, the same for both managers, so whether a renewal falls into a
// window of a few minutes is chance, and a compared figure that counted
// them would tell the draw rather than the manager. kubeAPIRequestsPerHour
// is every other request: the work the manager decided to do.
func kubeAPIMetrics(e *env, m Metrics, scale float64) error {
	if e.auditLog == "" {
		return nil
	}
	total, by, err := managerRequests(e.auditLog, e.countsSince)
	if err != nil {
		return err
	}
	addRequestMetrics(m, total, by, scale)
	return nil
}

// watchesInWindow names the check rows of the watches a window saw (in
// total, and "…: nodes" by resource).
const watchesInWindow = checkPrefix + "watches started in the window"

// addRequestMetrics adds total requests and their counts by "verb resource"
// to m, as kubeAPIMetrics says.
func addRequestMetrics(m Metrics, total int, by map[string]int, scale float64) {
	if scale == 1 {
		m["kubeAPIRequests"] = float64(total)
		for what, n := range by {
			m["kubeAPIRequests "+what] = float64(n)
		}
		return
	}
	watches := 0
	for what, n := range by {
		if verb, resource, _ := strings.Cut(what, " "); verb == "watch" {
			watches += n
			m[watchesInWindow+": "+resource] = float64(n)
			continue
		}
		m["kubeAPIRequestsPerHour "+what] = float64(n) * scale
	}
	m["kubeAPIRequestsPerHour"] = float64(total-watches) * scale
	m[watchesInWindow] = float64(watches)
}

// opMetrics adds total and every operation's count under name ("cloudCalls
// GET /v1/instances"), each scaled by scale (1 for totals, 3600/window for
// an hourly rate). Operations of minicloud's OpenStack dialect are also
// summed per API and method ("cloudCalls compute GET").
func opMetrics(m Metrics, name string, total int64, ops map[string]int64, scale float64) {
	m[name] = float64(total) * scale
	for op, n := range ops {
		m[name+" "+op] = float64(n) * scale
		if api, method, ok := openstackAPI(op); ok {
			m[name+" "+api+" "+method] += float64(n) * scale
		}
	}
}

// settle waits until nodes Nodes are initialized and services Services have
// ingress and the manager has sent what that work still owed the API server
// (waitQuiet), then zeroes the cloud's call counts.
func settle(ctx context.Context, e *env, nodes, services int) error {
	if err := e.waitInitialized(ctx, nodes); err != nil {
		return err
	}
	if err := e.waitIngress(ctx, services); err != nil {
		return err
	}
	if err := e.waitQuiet(ctx); err != nil {
		return err
	}
	return e.resetCounts(ctx)
}

// quietPeriod is how long the manager must have sent the API server nothing
// for waitQuiet to return; quietAtMost bounds the wait.
const (
	quietPeriod = 5 * time.Second
	quietAtMost = 3 * time.Minute
)

// waitQuiet waits until the manager has made no Kubernetes API request for
// quietPeriod (as the audit log records them), at most quietAtMost, and
// keeps in e.quietWait how long that took. The events of a burst are sent
// through the same client-side bucket as the controller's writes, so they
// can still be draining when the last Service has its ingress: without this
// wait a window measured next would count the setup's events as its own.
func (e *env) waitQuiet(ctx context.Context) error {
	e.quietWait = 0
	if e.audit == nil {
		return nil
	}
	start := time.Now()
	for {
		last, err := e.audit.lastManagerRequest()
		if err != nil {
			return err
		}
		now := time.Now()
		if now.Sub(last) >= quietPeriod || now.Sub(start) >= quietAtMost {
			e.quietWait = now.Sub(start)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the manager's API requests to pause: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
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
	nodeInitBurst("node-init-burst", "", func(s Sizes) int { return s.BurstNodes }),
	steadyState("steady-state", "", func(s Sizes) (int, int) { return s.SteadyNodes, s.SteadyServices }),
	lbBurst("lb-burst", "", func(s Sizes) (int, int) { return s.LBBurstNodes, s.LBBurstServices }),
	nodeChurn("node-churn", "", func(s Sizes) (int, int) { return s.ChurnServices, s.ChurnNodes }),
	withStratusCloudConfig(nodeChurn("node-churn-pools", "", func(s Sizes) (int, int) { return s.ChurnServices, s.ChurnNodes }), "backendPools: true\n"),
	{
		name:        "memory",
		heapProfile: true,
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
			// After the RSS: serving the profile allocates in the manager.
			if e.profiler != nil {
				if e.heapTop, err = e.profiler.heap(ctx, e.profileName); err != nil {
					return nil, err
				}
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

// nodeInitBurst is a scenario where nodes(s) machines exist and their
// kubelets register all at once: the time until all are initialized and the
// manager's cloud calls.
func nodeInitBurst(name, cloud string, nodes func(Sizes) int) scenario {
	return scenario{
		short:  true,
		name:   name,
		cloud:  cloud,
		params: func(s Sizes) map[string]any { return map[string]any{"nodes": nodes(s)} },
		// The machines exist; their kubelets register all at once.
		setup: func(ctx context.Context, e *env, s Sizes) error {
			return e.createInstances(ctx, nodeNames("burst", 0, nodes(s)))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			n := nodes(s)
			if err := e.resetCounts(ctx); err != nil {
				return nil, err
			}
			start := time.Now()
			if err := e.registerNodes(ctx, nodeNames("burst", 0, n)); err != nil {
				return nil, err
			}
			if err := e.waitInitialized(ctx, n); err != nil {
				return nil, err
			}
			m := Metrics{"secondsToAllInitialized": time.Since(start).Seconds()}
			return m, callMetrics(ctx, e, m)
		},
	}
}

// steadyState is a scenario of a cluster that has run for a while (the
// Nodes initialized, the Services' load balancers built): the manager's
// cloud calls per hour over s.SteadyWindow, with the kubelets' status
// reports.
func steadyState(name, cloud string, sizes func(Sizes) (nodes, services int)) scenario {
	return scenario{
		name:  name,
		cloud: cloud,
		params: func(s Sizes) map[string]any {
			nodes, services := sizes(s)
			return map[string]any{"nodes": nodes, "services": services, "window": s.SteadyWindow.String()}
		},
		setup: func(ctx context.Context, e *env, s Sizes) error {
			nodes, _ := sizes(s)
			return e.createInitializedNodes(ctx, nodeNames("steady", 0, nodes))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			nodes, services := sizes(s)
			if err := settleWithServices(ctx, e, nodes, "steady", services); err != nil {
				return nil, err
			}
			// The window itself, with the kubelets' status reports.
			beats, err := e.heartbeat(ctx, nodeNames("steady", 0, nodes), min(heartbeatPeriod, s.SteadyWindow), s.SteadyWindow)
			if err != nil {
				return nil, err
			}
			total, ops, err := e.managerStats(ctx)
			if err != nil {
				return nil, err
			}
			m := Metrics{checkPrefix + "node status reports by the harness": float64(beats)}
			opMetrics(m, "cloudCallsPerHour", total, ops, 3600/s.SteadyWindow.Seconds())
			return m, kubeAPIMetrics(e, m, 3600/s.SteadyWindow.Seconds())
		},
	}
}

// lbBurst is a scenario where LoadBalancer Services are created at once on
// a few nodes: the time until all have ingress and the manager's cloud
// calls.
func lbBurst(name, cloud string, sizes func(Sizes) (nodes, services int)) scenario {
	return scenario{
		short: true,
		name:  name,
		cloud: cloud,
		params: func(s Sizes) map[string]any {
			nodes, services := sizes(s)
			return map[string]any{"nodes": nodes, "services": services}
		},
		setup: func(ctx context.Context, e *env, s Sizes) error {
			nodes, _ := sizes(s)
			return e.createNodes(ctx, nodeNames("lbburst", 0, nodes))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			nodes, services := sizes(s)
			if err := settle(ctx, e, nodes, 0); err != nil {
				return nil, err
			}
			start := time.Now()
			if err := e.createServices(ctx, "lbburst", services); err != nil {
				return nil, err
			}
			if err := e.waitIngress(ctx, services); err != nil {
				return nil, err
			}
			m := Metrics{"secondsToAllIngress": time.Since(start).Seconds()}
			lbs, err := e.loadBalancerCount(ctx)
			if err != nil {
				return nil, err
			}
			m[checkPrefix+"load balancers in the cloud at the end"] = float64(lbs)
			if e.floatingPool.IsValid() {
				n, err := e.servicesWithFloatingIP(ctx)
				if err != nil {
					return nil, err
				}
				m[checkPrefix+"services whose ingress is a floating IP"] = float64(n)
			}
			return m, callMetrics(ctx, e, m)
		},
	}
}

// nodeChurn is a scenario where nodes join while load balancers exist (on
// churnBase nodes): the time until every load balancer has all of them as
// backends, the load-balancer updates and all cloud calls.
func nodeChurn(name, cloud string, sizes func(Sizes) (services, joining int)) scenario {
	return scenario{
		short: true,
		name:  name,
		cloud: cloud,
		params: func(s Sizes) map[string]any {
			services, joining := sizes(s)
			return map[string]any{"initialNodes": churnBase, "services": services, "joiningNodes": joining}
		},
		setup: func(ctx context.Context, e *env, s Sizes) error {
			_, joining := sizes(s)
			if err := e.createInstances(ctx, nodeNames("churn", churnBase, joining)); err != nil {
				return err
			}
			return e.createNodes(ctx, nodeNames("churn", 0, churnBase))
		},
		measure: func(ctx context.Context, e *env, s Sizes) (Metrics, error) {
			services, joining := sizes(s)
			if err := settleWithServices(ctx, e, churnBase, "churn", services); err != nil {
				return nil, err
			}
			if err := e.waitTargets(ctx, services, churnBase); err != nil {
				return nil, err
			}
			if err := e.resetCounts(ctx); err != nil {
				return nil, err
			}
			start := time.Now()
			if err := e.registerNodes(ctx, nodeNames("churn", churnBase, joining)); err != nil {
				return nil, err
			}
			if err := e.waitTargets(ctx, services, churnBase+joining); err != nil {
				return nil, err
			}
			m := Metrics{"secondsToAllBackends": time.Since(start).Seconds()}
			_, ops, err := e.managerStats(ctx)
			if err != nil {
				return nil, err
			}
			updates := int64(0)
			for op, n := range ops {
				if isBackendUpdate(op) {
					updates += n
				}
			}
			m["lbUpdateCalls"] = float64(updates)
			return m, callMetrics(ctx, e, m)
		},
	}
}

// withStratusCloudConfig is sc with extra cloud-config lines for stratus
// (scenario.stratusCloudConfig).
func withStratusCloudConfig(sc scenario, extra string) scenario {
	sc.stratusCloudConfig = extra
	return sc
}

// isBackendUpdate reports whether op changes a load balancer's backends:
// minicloud's update of a load balancer or of a backend pool (which changes
// the backends of every load balancer naming it), or an Octavia member
// change (the batch PUT, or one member's create, update or delete).
func isBackendUpdate(op string) bool {
	if op == "PUT /v1/load-balancers/{id}" || op == "PUT /v1/backend-pools/{id}" {
		return true
	}
	method, path, _ := strings.Cut(op, " ")
	return strings.HasPrefix(path, "/load-balancer/") && strings.Contains(path, "/members") && method != "GET"
}
