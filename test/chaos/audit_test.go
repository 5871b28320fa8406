package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/minicloud/api"
)

// audit checks the end state against what the cluster asks for.
type audit struct {
	w      *world
	sample int // Services whose traffic is checked
	// atWindowEnd is how many problems the first pass found, right after
	// the faults stopped.
	atWindowEnd int
	// logf, when set, gets a line per pass: when it began after the faults
	// stopped, how long it took and what it found (the last few problems in
	// full), so that a run's log shows what held its convergence.
	logf func(format string, args ...any)
}

// passLogLimit is how many of a pass's problems logf gets in full.
const passLogLimit = 12

// result is one pass of the audit.
type result struct {
	problems []string

	services, lbsCorrect, leaked          int
	nodes, stoppedTainted                 int
	routesWanted, routesPresent, stale    int
	trafficChecked, trafficOK             int
	trafficRetried                        int // ports that answered only at a later attempt
	nodeDeletions, wronglyDeleted         int
	instancesAtEnd, lbsAtEnd, routesAtEnd int
}

func (r *result) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// converge runs the audit until it finds nothing wrong (with traffic) or
// the deadline passes; it returns whether it converged and the last
// problems.
func (a *audit) converge(ctx context.Context, deadline time.Duration) (bool, []string) {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var last []string
	start := time.Now()
	for pass, first := 1, true; ; pass, first = pass+1, false {
		a.w.recreatePending(ctx)
		began := time.Now()
		r := a.check(ctx, true)
		if first {
			a.atWindowEnd = len(r.problems)
		}
		if a.logf != nil {
			shown := r.problems[:min(len(r.problems), passLogLimit)]
			a.logf("audit pass %d at +%s (took %s): %d problems%s", pass, began.Sub(start).Round(100*time.Millisecond),
				time.Since(began).Round(100*time.Millisecond), len(r.problems), indentLines(shown))
		}
		if len(r.problems) == 0 {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, last // the pass was cut short: keep the previous one's findings
		}
		last = r.problems
		select {
		case <-ctx.Done():
			return false, last
		case <-tick.C:
		}
	}
}

// indentLines renders lines one per line below a log line's head.
func indentLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("\n    ")
		b.WriteString(l)
	}
	return b.String()
}

// final is the audit's last pass, with wrongful deletions confirmed against
// the cloud.
func (a *audit) final(ctx context.Context) result {
	r := a.check(ctx, true)
	a.w.mu.Lock()
	dels := slices.Clone(a.w.nodeDels)
	a.w.mu.Unlock()
	r.nodeDeletions = len(dels)
	for _, d := range dels {
		wrong := !d.instanceDeletedFirst
		if d.id != "" {
			// The instance still exists: deleting its Node was wrong
			// whatever the record says.
			if exists, err := a.w.ops.exists(ctx, d.id); err != nil {
				r.problem("look up machine %s of deleted node %s: %v", d.id, d.name, err)
			} else if exists {
				wrong = true
			}
		}
		if wrong {
			r.wronglyDeleted++
		}
	}
	return r
}

func (a *audit) check(ctx context.Context, traffic bool) result {
	var r result
	w := a.w
	svcs, err := w.cs.CoreV1().Services(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.problem("list services: %v", err)
		return r
	}
	nodes, err := w.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		r.problem("list nodes: %v", err)
		return r
	}
	lbs, err := w.prov.loadBalancers(ctx, w.c)
	if err != nil {
		r.problem("list load balancers: %v", err)
		return r
	}
	var routes []api.Route
	if w.prov.routes != nil {
		routes, err = w.prov.routes(ctx, w.c)
		if err != nil {
			r.problem("list routes: %v", err)
			return r
		}
	}
	instanceByID, err := w.ops.list(ctx)
	if err != nil {
		r.problem("list machines: %v", err)
		return r
	}
	r.instancesAtEnd, r.lbsAtEnd, r.routesAtEnd = len(instanceByID), len(lbs), len(routes)

	w.mu.Lock()
	machines := map[string]machine{}
	for name, m := range w.machines {
		machines[name] = *m
	}
	pending := slices.Clone(w.pending)
	w.mu.Unlock()
	for _, name := range pending {
		r.problem("service %s/%s deleted and not recreated yet", w.ns, name)
	}

	// Nodes: every machine not deleted has its initialized Node, stopped
	// ones tainted; the Nodes of deleted instances are gone.
	var backends []string
	present := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		present[n.Name] = n
	}
	for name, m := range machines {
		n, ok := present[name]
		switch {
		case m.state == gone && ok:
			r.problem("node %s: its instance %s was deleted, the Node is still there (%s; test: %s)", name, m.id, nodeState(n), strings.Join(m.history, ", "))
		case m.state == gone:
		case !ok:
			r.problem("node %s: missing, its instance %s is %s", name, m.id, m.state)
		case n.Spec.ProviderID != w.prov.providerID(m.id):
			r.problem("node %s: provider ID %q, want %q", name, n.Spec.ProviderID, w.prov.providerID(m.id))
		case hasTaint(n, cloudproviderapi.TaintExternalCloudProvider):
			r.problem("node %s: still uninitialized", name)
		case m.state == stopped && !hasTaint(n, cloudproviderapi.TaintNodeShutdown):
			r.problem("node %s: instance stopped, no shutdown taint", name)
		case m.state == running && hasTaint(n, cloudproviderapi.TaintNodeShutdown):
			r.problem("node %s: instance running, shutdown taint still set", name)
		default:
			r.nodes++
			if m.state == stopped {
				r.stoppedTainted++
			}
		}
		if ok && m.state != gone {
			if _, exists := instanceByID[m.id]; !exists {
				r.problem("node %s: instance %s missing from the cloud, the test never deleted it", name, m.id)
			}
			if n.DeletionTimestamp == nil {
				backends = append(backends, w.ops.target(m))
			}
		}
	}
	sort.Strings(backends)

	// Load balancers: exactly one per Service, as the Service asks.
	live := map[string]bool{}
	var sampled []corev1.Service
	for _, svc := range svcs.Items {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		r.services++
		live[string(svc.UID)] = true
		if svc.DeletionTimestamp != nil {
			r.problem("service %s: still terminating", svc.Name)
			continue
		}
		var mine []serviceLB
		for _, lb := range lbs {
			if lb.uid == string(svc.UID) {
				mine = append(mine, lb)
			}
		}
		if len(mine) != 1 {
			r.problem("service %s: %d load balancers, want 1", svc.Name, len(mine))
			continue
		}
		if bad := lbMismatch(&svc, &mine[0], backends, !w.prov.noHealthCheck); bad != "" {
			r.problem("service %s: load balancer %s: %s", svc.Name, mine[0].lb.ID, bad)
			continue
		}
		r.lbsCorrect++
		if len(sampled) < a.sample {
			sampled = append(sampled, svc)
		}
	}
	for _, lb := range lbs {
		if !live[lb.uid] {
			r.leaked++
			r.problem("load balancer %s (%s) of service %s/%s (uid %s): its Service is gone", lb.lb.ID, lb.lb.Name,
				lb.namespace, lb.name, lb.uid)
		}
	}

	// Routes: one per Node's pod CIDR to its instance, none for others.
	wantRoutes := map[string]string{}
	for name, m := range machines {
		if n, ok := present[name]; ok && m.state != gone && n.Spec.PodCIDR != "" && w.prov.routes != nil {
			wantRoutes[n.Spec.PodCIDR] = m.id
		}
	}
	r.routesWanted = len(wantRoutes)
	got := map[string]string{}
	for _, rt := range routes {
		got[rt.DestinationCIDR] = rt.TargetInstanceID
	}
	for cidr, id := range wantRoutes {
		if got[cidr] == id {
			r.routesPresent++
		} else {
			r.problem("route %s -> %s: missing (have %q)", cidr, id, got[cidr])
		}
	}
	for cidr, id := range got {
		if _, ok := wantRoutes[cidr]; !ok {
			r.stale++
			r.problem("route %s -> %s: stale", cidr, id)
		}
	}

	// Traffic, once everything else holds: through each sampled Service's
	// VIP, on each port, to a running node.
	if !traffic || len(r.problems) > 0 {
		return r
	}
	health := map[string]string{}
	for _, lb := range lbs {
		var hs []string
		for _, th := range lb.lb.TargetHealth {
			hs = append(hs, fmt.Sprintf("%s %s %s", th.IP, th.State, th.Reason))
		}
		health[lb.uid] = strings.Join(hs, "; ")
	}
	for _, svc := range sampled {
		vip := svc.Status.LoadBalancer.Ingress[0].IP
		for _, p := range svc.Spec.Ports {
			r.trafficChecked++
			// A connection closed or refused once on this loaded machine is
			// tried again (at most three attempts, a second apart) and
			// counted: a port that never answers is still a problem.
			var reply devenv.Reply
			var err error
			for attempt := 0; attempt < 3; attempt++ {
				if attempt > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
				if reply, err = devenv.GetReply(ctx, "http://"+hostPort(vip, p.Port)+"/"); err == nil {
					if attempt > 0 {
						r.trafficRetried++
					}
					break
				}
			}
			switch {
			case err != nil:
				r.problem("service %s port %d: %v (targets: %s)", svc.Name, p.Port, err, health[string(svc.UID)])
			case reply.Service != svc.Name || reply.Namespace != svc.Namespace:
				r.problem("service %s port %d: answered by service %s/%s", svc.Name, p.Port, reply.Namespace, reply.Service)
			case machines[reply.Node].state != running:
				r.problem("service %s port %d: answered by node %q, not a running one", svc.Name, p.Port, reply.Node)
			default:
				r.trafficOK++
			}
		}
	}
	return r
}

// lbMismatch says how slb differs from what svc asks for, or "" (with
// healthCheck, a Local Service's health check included).
func lbMismatch(svc *corev1.Service, slb *serviceLB, backends []string, healthCheck bool) string {
	lb := &slb.lb
	if lb.State != api.LBActive {
		return "state " + lb.State
	}
	if ing := svc.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != slb.ingress {
		return fmt.Sprintf("Service ingress %v, want %s", ing, slb.ingress)
	}
	var want, have []string
	for _, p := range svc.Spec.Ports {
		want = append(want, fmt.Sprintf("%s:%d->%d", p.Protocol, p.Port, p.NodePort))
	}
	for _, l := range lb.Listeners {
		have = append(have, fmt.Sprintf("%s:%d->%d", l.Protocol, l.Port, l.TargetPort))
	}
	sort.Strings(want)
	sort.Strings(have)
	if !slices.Equal(want, have) {
		return fmt.Sprintf("listeners %v, want %v", have, want)
	}
	var targets []string
	for _, tg := range lb.ServedTargets() {
		targets = append(targets, tg.InstanceID+tg.IP)
	}
	sort.Strings(targets)
	if !slices.Equal(targets, backends) {
		return fmt.Sprintf("%d targets, want %d (%s)", len(targets), len(backends), diff(targets, backends))
	}
	wantRanges := slices.Clone(svc.Spec.LoadBalancerSourceRanges)
	sort.Strings(wantRanges)
	haveRanges, ok := lb.AdmittedSources()
	if !ok {
		var each []string
		for _, l := range lb.Listeners {
			each = append(each, fmt.Sprintf("%s:%d %v", l.Protocol, l.Port, lb.SourcesOf(l)))
		}
		return fmt.Sprintf("listeners admit different source ranges (%s), want %v", strings.Join(each, ", "), wantRanges)
	}
	if !slices.Equal(wantRanges, haveRanges) {
		return fmt.Sprintf("source ranges %v, want %v", haveRanges, wantRanges)
	}
	if healthCheck && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		if hc := lb.HealthCheck; hc == nil || hc.Protocol != api.ProtocolHTTP || hc.Port != int(svc.Spec.HealthCheckNodePort) {
			return fmt.Sprintf("health check %+v, want HTTP on healthCheckNodePort %d", hc, svc.Spec.HealthCheckNodePort)
		}
	}
	return ""
}

// diff names what have lacks and has extra, a few of each.
func diff(have, want []string) string {
	var missing, extra []string
	for _, x := range want {
		if !slices.Contains(have, x) {
			missing = append(missing, x)
		}
	}
	for _, x := range have {
		if !slices.Contains(want, x) {
			extra = append(extra, x)
		}
	}
	short := func(s []string) []string { return s[:min(len(s), 5)] }
	return fmt.Sprintf("missing %v, extra %v", short(missing), short(extra))
}

// nodeState sums up a Node for a problem message.
func nodeState(n corev1.Node) string {
	ready := "no Ready condition"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = fmt.Sprintf("Ready=%s since %s", c.Status, c.LastTransitionTime.Format("15:04:05"))
		}
	}
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.Key)
	}
	return fmt.Sprintf("%s, provider ID %q, taints %v", ready, n.Spec.ProviderID, taints)
}

func hasTaint(n corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// report is the run's table.
type report struct {
	provider       string
	size           size
	seed           uint64
	full           bool
	populate       time.Duration
	window         time.Duration
	churn          churnStats
	faults         faultStats
	leaders        leaderStats
	converged      bool
	convergeTime   time.Duration
	atWindowEnd    int
	final          result
	leaks          []string
	secretsChecked int
	extra          []reportRow // the provider's
}

// reportRow is one row of the report table.
type reportRow struct{ what, result string }

func (r report) markdown() string {
	var b strings.Builder
	row := func(what string, format string, args ...any) {
		fmt.Fprintf(&b, "| %s | %s |\n", what, fmt.Sprintf(format, args...))
	}
	name := "short (make test)"
	if r.full {
		name = "full (make chaos)"
	}
	b.WriteString("| what | result |\n|---|---|\n")
	row("run", "%s, provider %s, seed %d, %d stratus-ccm replicas", name, r.provider, r.seed, r.size.replicas)
	row("load held", "%d nodes, %d LoadBalancer Services (populated in %s)", r.size.nodes, r.size.services, r.populate.Round(time.Second))
	row("window", "%s, one change every %s", r.window, r.size.churnEvery)
	row("node churn", "%d joined, %d left (instance deleted), %d stopped, %d restarted", r.churn.joined, r.churn.left, r.churn.stops, r.churn.starts)
	row("service churn", "%d created, %d changed (ports, traffic policy, source ranges), %d deleted and recreated under the same name", r.churn.created, r.churn.changed, r.churn.recreated)
	var kinds []string
	for _, k := range r.faults.kinds {
		kinds = append(kinds, fmt.Sprintf("%s ×%d", k, r.faults.steps[k]))
	}
	row("cloud faults", "steps of %s: %s", r.size.faultStep, strings.Join(kinds, "; "))
	unauth := ""
	if r.faults.unauthorized > 0 {
		unauth = fmt.Sprintf(", %d answered 401", r.faults.unauthorized)
	}
	row("cloud answers faulted", "%d of %d requests answered 500, %d answered 429%s; %d instance listings emptied", r.faults.errors, r.faults.requests, r.faults.throttled, unauth, r.faults.emptied)
	row("leader kills (SIGKILL)", "%d, every %s; failover %s", r.leaders.kills, r.size.killEvery, r.leaders.failoverSummary())
	p := r.leaders.part
	if p.done {
		row("partition of the leader", "%s; old leader exited after %s, new leader after %s, both leading at once for %s",
			r.size.partitionFor, orNone(p.oldExited), orNone(p.newLeader), p.overlap.Round(100*time.Millisecond))
	} else {
		row("partition of the leader", "not done (no leader during the window)")
	}
	if ps := r.leaders.pause; ps.done {
		row("pause of the leader (SIGSTOP past the lease)", "successor acquired the lease %s after the SIGSTOP; after the SIGCONT the old leader's renew failed after %s, it exited after %s: both leading at once for %s; cloud writes by the old leader meanwhile: %s",
			orNone(ps.newLeader), orNone(ps.noticed), orNone(ps.exited), ps.overlap.Round(10*time.Millisecond), writesSummary(ps.writes))
	} else {
		row("pause of the leader (SIGSTOP past the lease)", "not done (no leader, or no successor within %s)", pauseMax)
	}
	row("replica restarts", "%d (kills, lost leases)", r.leaders.exits)
	row("problems when the faults stopped", "%d (missing or wrong load balancers, nodes, routes, traffic)", r.atWindowEnd)
	if r.converged {
		row("time to converge", "%s after the faults stopped", r.convergeTime.Round(time.Second))
	} else {
		row("time to converge", "NOT converged within %s", r.size.converge)
	}
	f := r.final
	row("load balancers", "%d of %d Services with exactly one correct load balancer (listeners, targets, source ranges, health check)", f.lbsCorrect, f.services)
	row("traffic", "%d of %d ports of %d sampled Services answered through their VIP by a running node (%d only at a second or third attempt)", f.trafficOK, f.trafficChecked, min(r.size.trafficSample, f.services), f.trafficRetried)
	row("leaked load balancers", "%d (after the 30 s orphan grace)", f.leaked)
	row("nodes", "%d correct (%d stopped ones with the shutdown taint)", f.nodes, f.stoppedTainted)
	row("node deletions", "%d, of which wrongly deleted (instance existed): %d", f.nodeDeletions, f.wronglyDeleted)
	row("routes", "%d of %d present, %d stale", f.routesPresent, f.routesWanted, f.stale)
	row("credentials in logs", "%d found (%d secrets searched in every process's log)", len(r.leaks), r.secretsChecked)
	for _, e := range r.extra {
		row(e.what, "%s", e.result)
	}
	row("problems left", "%d", len(f.problems))
	return b.String()
}

func orNone(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return d.Round(100 * time.Millisecond).String()
}

// writesSummary counts writes by what they were.
func writesSummary(ws []cloudWrite) string {
	if len(ws) == 0 {
		return "0"
	}
	counts := map[string]int{}
	var order []string
	for _, w := range ws {
		if counts[w.what] == 0 {
			order = append(order, w.what)
		}
		counts[w.what]++
	}
	parts := make([]string, 0, len(order))
	for _, what := range order {
		parts = append(parts, fmt.Sprintf("%s ×%d", what, counts[what]))
	}
	return fmt.Sprintf("%d (%s)", len(ws), strings.Join(parts, ", "))
}
