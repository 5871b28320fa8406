package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/plugin"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// faultPluginKilled kills the provider plugins with SIGKILL for a step.
const faultPluginKilled = "provider plugins (every replica's) kill -9, restart after a step"

// pluginShort is the plugin run under `go test`: a few nodes and Services,
// every fault kind (minicloud's six and the plugin's kill) once.
var pluginShort = size{nodes: 4, services: 4, replicas: 2, window: 25 * time.Second, churnEvery: time.Second,
	faultStep: 3 * time.Second, killEvery: 20 * time.Second, partitionFor: 8 * time.Second,
	converge: 3 * time.Minute, trafficSample: 4}

// TestChaosPlugin is the chaos run with the managers' provider out of
// process: each replica has its own `stratus-ccm plugin serve --provider
// minicloud` child process (reaching minicloud at the replica's front
// address, so that the front tells the replicas' writes apart), and every
// plugin is killed with SIGKILL and restarted a step later among the cloud
// faults. While they are dead every call of the managers fails
// (transiently): no Node may be deleted, no Service may lose its load
// balancer or its ingress, and the end state is audited as for the
// minicloud run.
func TestChaosPlugin(t *testing.T) {
	pl := &pluginProc{t: t}
	p := &provider{
		name:  "minicloud through a plugin (stratus-ccm plugin serve)",
		block: 254,
		short: pluginShort,
		setup: func(t *testing.T, c *chaosCloud) []string {
			// A unix socket path must be short: not under t.TempDir.
			dir, err := os.MkdirTemp("", "chaos-plugin")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			pl.c = c
			return perReplica(c, func(i int) string {
				socket := filepath.Join(dir, fmt.Sprintf("mc-%d.sock", i+1))
				pl.args = append(pl.args, []string{"plugin", "serve", "--provider=minicloud", "--cloud-config=" + minicloudConfigFile(t, c, i, ""),
					"--socket=" + socket, "--kubeconfig=" + c.kubeconfig})
				pl.procs = append(pl.procs, nil)
				pl.start(i)
				return fmt.Sprintf(`- name: mc
  type: plugin
  plugin:
    address: unix://%s
    connectTimeout: 1m
  instanceCacheFreshness: 5s
`, socket)
			})
		},
		machines:      onMinicloud,
		providerID:    mcprovider.ProviderID,
		listing:       minicloudListing,
		loadBalancers: minicloudLoadBalancers,
		routes:        minicloudRoutes,
		faults: []providerFault{{kind: faultPluginKilled, apply: func(ctx context.Context, f *faultDriver) api.Faults {
			pl.killFor(ctx, f.step)
			return api.Faults{}
		}}},
		logs:   pl.logs,
		report: pl.report,
	}
	runChaos(t, p)
	st := pl.stats()
	if st.kills == 0 {
		t.Error("the plugins were never killed")
	}
	for _, v := range st.problems {
		t.Errorf("while the plugins were dead: %s", v)
	}
}

// pluginProc is the replicas' `stratus-ccm plugin serve` child processes
// (one per replica), killed with SIGKILL and started again by the plugin
// fault, with a record of what changed while they were dead.
type pluginProc struct {
	t    *testing.T
	c    *chaosCloud
	args [][]string // per replica

	mu    sync.Mutex
	procs [][]*managertest.Process // per replica, every incarnation
	st    pluginStats
}

type pluginStats struct {
	kills                               int
	dead                                time.Duration
	nodeDeletions, lbsGone, ingressLost int
	problems                            []string
}

// start starts replica i's plugin.
func (p *pluginProc) start(i int) {
	proc := managertest.StartCommand(p.t, p.args[i]...)
	p.mu.Lock()
	p.procs[i] = append(p.procs[i], proc)
	p.mu.Unlock()
}

// current is every replica's running plugin.
func (p *pluginProc) current() []*managertest.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*managertest.Process, len(p.procs))
	for i, procs := range p.procs {
		out[i] = procs[len(procs)-1]
	}
	return out
}

// killFor kills every plugin, keeps them dead for d, then starts them
// again. What the cluster and the cloud hold before the kill is compared
// with what they hold before the restart: while the plugins are dead every
// call of the managers fails, so a Node deleted, a load balancer gone or a
// Service whose ingress was cleared would be an error taken for "gone".
func (p *pluginProc) killFor(ctx context.Context, d time.Duration) {
	// The step's only fault is the dead plugin (and the test's snapshots
	// need an unfaulted cloud).
	if err := faultsOff(ctx, p.c.cl); err != nil {
		p.t.Logf("chaos: plugin fault: clear the cloud's faults: %v", err)
	}
	before, err := p.snapshot(ctx)
	if err != nil {
		p.t.Logf("chaos: plugin fault: snapshot before the kill: %v", err)
	}
	procs := p.current()
	killed := time.Now()
	for _, proc := range procs {
		_ = proc.Signal(syscall.SIGKILL)
	}
	for _, proc := range procs {
		_ = proc.Wait(time.Minute)
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	after, aerr := p.snapshot(context.Background())
	dead := time.Since(killed)
	for i := range procs {
		p.start(i)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.kills++
	p.st.dead += dead
	if err != nil || aerr != nil {
		return
	}
	// A Node deleted meanwhile is wrong if its instance exists (a deletion
	// decided before the kill, of an instance the test deleted, may land
	// after it).
	for name, id := range before.nodes {
		if _, ok := after.nodes[name]; ok {
			continue
		}
		p.st.nodeDeletions++
		if id == "" {
			continue // never initialized: no instance known to look up
		}
		if _, err := p.c.cl.GetInstance(context.Background(), id); !client.IsNotFound(err) {
			p.st.problems = append(p.st.problems, fmt.Sprintf("node %s deleted, its instance %s exists (or its lookup failed: %v)", name, id, err))
		}
	}
	for id := range before.lbs {
		if !after.lbs[id] {
			p.st.lbsGone++
			p.st.problems = append(p.st.problems, fmt.Sprintf("load balancer %s gone", id))
		}
	}
	for uid, ing := range before.ingress {
		if now, ok := after.ingress[uid]; ok && now != ing {
			p.st.ingressLost++
			p.st.problems = append(p.st.problems, fmt.Sprintf("service (uid %s) ingress %q became %q", uid, ing, now))
		}
	}
}

// pluginSnapshot is what the plugins' death must not change: the Nodes, the
// cluster's load balancers, and the ingress of every Service that has one
// (by UID, so that a Service deleted and recreated meanwhile is another).
type pluginSnapshot struct {
	nodes   map[string]string // name: instance ID (from the provider ID)
	lbs     map[string]bool
	ingress map[string]string
}

func (p *pluginProc) snapshot(ctx context.Context) (pluginSnapshot, error) {
	s := pluginSnapshot{nodes: map[string]string{}, lbs: map[string]bool{}, ingress: map[string]string{}}
	cs := p.c.kube
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		id, _ := mcprovider.InstanceIDOf(n.Spec.ProviderID) // "" while uninitialized
		s.nodes[n.Name] = id
	}
	svcs, err := cs.CoreV1().Services(p.c.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, fmt.Errorf("list services: %w", err)
	}
	for _, svc := range svcs.Items {
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) > 0 {
			s.ingress[string(svc.UID)] = ing[0].IP
		}
	}
	lbs, err := p.c.cl.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagCluster: p.c.ns}})
	if err != nil {
		return s, fmt.Errorf("list load balancers: %w", err)
	}
	for _, lb := range lbs {
		s.lbs[lb.ID] = true
	}
	return s, nil
}

func (p *pluginProc) stats() pluginStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// report sums up the plugins' deaths: how often and how long, how many
// of the managers' calls failed on a dead plugin (their log lines saying
// so), and what changed while they were dead.
func (p *pluginProc) report(logs map[string]string) []reportRow {
	st := p.stats()
	failed := 0
	for name, body := range logs {
		if strings.HasPrefix(name, "stratus-ccm-") {
			failed += strings.Count(body, plugin.ErrUnavailable.Error())
		}
	}
	return []reportRow{{"provider plugins killed (SIGKILL)", fmt.Sprintf(
		"%d times, dead %s in all; %d manager log lines of calls failing on a dead plugin; while dead: %d Node deletions (wrong: %d), %d load balancers gone, %d Service ingresses lost",
		st.kills, st.dead.Round(100*time.Millisecond), failed, st.nodeDeletions, len(st.problems)-st.lbsGone-st.ingressLost, st.lbsGone, st.ingressLost)}}
}

// logs are every incarnation's output, a log per replica's plugin.
func (p *pluginProc) logs() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for r, procs := range p.procs {
		var b strings.Builder
		for i, proc := range procs {
			fmt.Fprintf(&b, "=== plugin incarnation %d\n%s", i+1, proc.Output())
		}
		out[fmt.Sprintf("plugin-%d.log", r+1)] = b.String()
	}
	return out
}
