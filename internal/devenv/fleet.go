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

// fleet runs one simulated kubelet per running minicloud instance tagged
// NodeTagKey=NodeTagValue: a kubelet starts when its instance runs (created
// or started) and stops, so its heartbeats stop, when the instance is
// stopped or deleted — as a real machine's kubelet would.
type fleet struct {
	cloud  *client.Client
	client kubernetes.Interface
	say    func(format string, args ...any)

	kubelets map[string]*runningKubelet // by instance ID
}

type runningKubelet struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
}

// run follows minicloud until ctx is done, then stops every kubelet.
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

// sync starts and stops kubelets to match the running tagged instances.
func (f *fleet) sync(ctx context.Context) {
	logger := log.FromContext(ctx)
	instances, err := f.cloud.ListInstances(ctx, client.ListOptions{Tags: map[string]string{NodeTagKey: NodeTagValue}})
	if err != nil {
		if ctx.Err() == nil {
			logger.Info("listing instances failed; kubelets unchanged", "error", err.Error())
		}
		return
	}
	running := map[string]api.Instance{}
	for _, in := range instances {
		if in.State == api.InstanceRunning {
			running[in.ID] = in
		}
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
		f.say("node %s: instance %s stopped or deleted; its kubelet stops heartbeating", k.name, id)
	}
	ids := make([]string, 0, len(running))
	for id := range running {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return running[ids[i]].Name < running[ids[j]].Name })
	for _, id := range ids {
		if _, ok := f.kubelets[id]; ok {
			continue
		}
		in := running[id]
		kctx, cancel := context.WithCancel(ctx)
		k := &runningKubelet{name: in.Name, cancel: cancel, done: make(chan struct{})}
		f.kubelets[id] = k
		kubelet := &Kubelet{Name: in.Name, IP: in.PrivateIP, Client: f.client}
		go func() {
			defer close(k.done)
			if err := kubelet.Run(kctx); err != nil && kctx.Err() == nil {
				logger.Error(err, "kubelet stopped", "node", in.Name)
			}
		}()
		f.say("node %s: kubelet started for instance %s (%s, %s)", in.Name, in.ID, in.Zone, in.PrivateIP)
	}
}
