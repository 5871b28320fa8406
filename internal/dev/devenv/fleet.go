package devenv

import (
	"context"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// machine is a running machine of the cloud that gets a simulated kubelet.
type machine struct {
	// ID identifies the machine in its cloud: a kubelet runs per ID, so a
	// machine replaced under the same name gets a new one.
	ID string
	// Kubelet is the kubelet that stands in for it.
	Kubelet Kubelet
	// What describes it in the stream, e.g. "instance i-1 (zone-a, 127.200.0.2)".
	What string
	// Gone says what happened when it stops running, e.g. "instance i-1
	// stopped or deleted".
	Gone string
	// run, if set, runs the machine's node instead of Kubelet (a real
	// node: kubelet, containerd and kube-proxy) until ctx is done.
	run func(ctx context.Context) error
}

// fleet runs one simulated kubelet per running machine that list returns:
// a kubelet starts when its machine runs (created or started) and stops,
// so its heartbeats stop, when the machine stops or is deleted — as a real
// machine's kubelet would.
type fleet struct {
	// list returns the running machines; an error leaves the kubelets as
	// they are (the cloud is unreachable, not the machines).
	list   func(ctx context.Context) ([]machine, error)
	client kubernetes.Interface
	say    func(format string, args ...any)

	kubelets map[string]*runningKubelet // by machine ID
}

type runningKubelet struct {
	name   string
	gone   string
	cancel context.CancelFunc
	done   chan struct{}
}

// run follows the cloud until ctx is done, then stops every kubelet.
func (f *fleet) run(ctx context.Context) {
	f.kubelets = map[string]*runningKubelet{}
	wait.UntilWithContext(ctx, f.sync, fleetPeriod)
	var wg sync.WaitGroup
	for _, k := range f.kubelets {
		wg.Add(1)
		go func() { defer wg.Done(); k.cancel(); <-k.done }()
	}
	wg.Wait()
}

// sync starts and stops kubelets to match the running machines.
func (f *fleet) sync(ctx context.Context) {
	logger := log.FromContext(ctx)
	machines, err := f.list(ctx)
	if err != nil {
		if ctx.Err() == nil {
			logger.Info("listing machines failed; kubelets unchanged", "error", err.Error())
		}
		return
	}
	running := map[string]machine{}
	for _, m := range machines {
		running[m.ID] = m
	}
	for id, k := range f.kubelets {
		select {
		case <-k.done: // ended on its own (e.g. could not register): start again below
			delete(f.kubelets, id)
			continue
		default:
		}
		if _, ok := running[id]; ok {
			continue
		}
		k.cancel()
		<-k.done
		delete(f.kubelets, id)
		f.say("node %s: %s; its kubelet stops heartbeating", k.name, k.gone)
	}
	ids := make([]string, 0, len(running))
	for id := range running {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return running[ids[i]].Kubelet.Name < running[ids[j]].Kubelet.Name })
	for _, id := range ids {
		if _, ok := f.kubelets[id]; ok {
			continue
		}
		m := running[id]
		kctx, cancel := context.WithCancel(ctx)
		k := &runningKubelet{name: m.Kubelet.Name, gone: m.Gone, cancel: cancel, done: make(chan struct{})}
		f.kubelets[id] = k
		kubelet := m.Kubelet
		kubelet.Client = f.client
		run := kubelet.Run
		if m.run != nil {
			run = m.run
		}
		go func() {
			defer close(k.done)
			if err := run(kctx); err != nil && kctx.Err() == nil {
				logger.Error(err, "kubelet stopped", "node", kubelet.Name)
				f.say("node %s: stopped: %v", kubelet.Name, err)
			}
		}()
		f.say("node %s: kubelet started for %s", m.Kubelet.Name, m.What)
	}
}

// minicloudMachines lists the running minicloud instances tagged
// NodeTagKey=NodeTagValue.
func minicloudMachines(cloud *client.Client) func(context.Context) ([]machine, error) {
	return func(ctx context.Context) ([]machine, error) {
		instances, err := cloud.ListInstances(ctx, client.ListOptions{Tags: map[string]string{NodeTagKey: NodeTagValue}})
		if err != nil {
			return nil, err
		}
		var out []machine
		for _, in := range instances {
			if in.State != api.InstanceRunning {
				continue
			}
			out = append(out, machine{
				ID:      in.ID,
				Kubelet: Kubelet{Name: in.Name, IP: in.PrivateIP},
				What:    "instance " + in.ID + " (" + in.Zone + ", " + in.PrivateIP + ")",
				Gone:    "instance " + in.ID + " stopped or deleted",
			})
		}
		return out, nil
	}
}
