package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stratus-ccm/stratus/internal/cloud"
	nodectl "github.com/stratus-ccm/stratus/internal/controller/node"
)

const (
	// LabelExcludeFromLB excludes a node from load balancer backends unless its
	// value parses as a boolean false.
	LabelExcludeFromLB = v1.LabelNodeExcludeBalancers
	// TaintToBeDeleted is the cluster autoscaler's taint on nodes it is removing;
	// such nodes are not load balancer backends.
	TaintToBeDeleted = "ToBeDeletedByClusterAutoscaler"
)

// IsBackend reports whether node is a load balancer backend (upstream's "stable
// node set" predicates): not being deleted, not excluded by label, not being
// removed by the cluster autoscaler. Readiness, cordoning and other taints do not
// matter; load balancer health checks handle those.
func IsBackend(node *v1.Node) bool {
	if node.DeletionTimestamp != nil {
		return false
	}
	if v, ok := node.Labels[LabelExcludeFromLB]; ok {
		if excluded, err := strconv.ParseBool(v); err != nil || excluded {
			return false
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == TaintToBeDeleted {
			return false
		}
	}
	return true
}

// backendChanged reports whether an update of a node can change any load
// balancer's backend set: its backend predicate result or the provider ID it
// is a backend under changed. listed gives a joining node's provider ID from
// the cached instance listing ("" when unknown; nil: none), as backends names
// it: the initialization of a node already named so changes nothing, and
// does not hold back a pass waiting for a burst of changes to pause.
func backendChanged(old, new *v1.Node, listed func(*v1.Node) string) bool {
	return IsBackend(old) != IsBackend(new) || backendID(old, listed) != backendID(new, listed)
}

// backendID is the provider ID node is a backend under: its own, or for a
// joining node the one listed gives it.
func backendID(node *v1.Node, listed func(*v1.Node) string) string {
	if listed != nil && joining(node) {
		return listed(node)
	}
	return node.Spec.ProviderID
}

// nodesKey is the single work item of the node syncer: all node changes of one
// window collapse into it.
var nodesKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "backend-nodes"}}

// nodeEvents enqueues nodesKey a window after the first relevant node change;
// the queue keeps the earliest time, and the pass waits until the changes
// have paused for a window (burst), so that a burst of joining nodes shares
// one pass.
func nodeEvents(window time.Duration, clk clock.PassiveClock, burst *nodeBurst, listed func(*v1.Node) string) handler.TypedEventHandler[*v1.Node, reconcile.Request] {
	add := passTrigger(window, clk, burst)
	return handler.TypedFuncs[*v1.Node, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if backendChanged(e.ObjectOld, e.ObjectNew, listed) {
				add(q)
			}
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
}

// passTrigger returns what enqueues nodesKey a window after a change, as part
// of the current burst of changes.
func passTrigger(window time.Duration, clk clock.PassiveClock, burst *nodeBurst) func(workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	return func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		burst.touch(clk.Now())
		q.AddAfter(nodesKey, window)
	}
}

// adoptionEvents enqueues nodesKey for the load balancers adopted at
// start-up (Controller.verifyBackends), like a node change: the adoptions of
// a start-up share one pass.
func adoptionEvents(window time.Duration, clk clock.PassiveClock, burst *nodeBurst) handler.EventHandler {
	add := passTrigger(window, clk, burst)
	return handler.Funcs{
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
}

// burstHoldWindows bounds how many windows a pass waits for a burst of node
// changes to pause: a steady stream of changes still gets a pass this often.
const burstHoldWindows = 10

// nodeBurst tracks the node changes not yet handled by a pass: when the
// first and the last came, and how many relevant changes there were in all
// (seq), so that a running pass sees whether its backend set is stale.
type nodeBurst struct {
	mu          sync.Mutex
	first, last time.Time
	seq         uint64
}

func (b *nodeBurst) touch(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first.IsZero() {
		b.first = now
	}
	b.last = now
	b.seq++
}

// changes returns the number of relevant node changes so far.
func (b *nodeBurst) changes() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// hold returns how long a pass due at now should wait for the changes to
// pause for window (0: run it now, and the changes so far are its own).
func (b *nodeBurst) hold(now time.Time, window time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if quiet := b.last.Add(window).Sub(now); quiet > 0 && now.Sub(b.first) < burstHoldWindows*window {
		return quiet
	}
	b.first, b.last = time.Time{}, time.Time{}
	return 0
}

// backends lists the cluster's load balancer backends from the informer cache.
// The nodes are shared with the cache: nobody may modify them (the cloud-provider
// contract already requires providers to treat them as read-only).
//
// A node whose machine the cloud layer knows to be gone is left out: the node
// lifecycle controller's guard may keep such a Node for minutes, and a machine
// that does not exist serves no traffic (clouds reject it as a target).
//
// A node that is not initialized yet is a backend at once, with the provider
// ID and addresses its provider's cached instance listing gives it. One the listing does
// not know, that joined less than NodeInitWait ago (joining), is left out
// while other backends exist (selectBackends): its initialization sets its
// provider ID, which triggers a backend update that names it. recheck is when
// the first such node's wait ends (0 when none was left out).
func (c *Controller) backends(ctx context.Context) (nodes []*v1.Node, recheck time.Duration, err error) {
	cached, err := c.nodes.list()
	if err != nil {
		return nil, 0, err
	}
	observed := make([]*v1.Node, 0, len(cached))
	for _, n := range cached {
		if !IsBackend(n) || c.knownGone(n) {
			continue
		}
		if joining(n) {
			// The instance listing the cloud layer holds (the node
			// controller lists to initialize it) may already know the
			// machine: then the node is a backend at once, under that ID.
			// Its addresses are then the listed ones, merged as its
			// initialization will merge them: a provider that targets
			// node addresses (OpenStack's pool members) would otherwise
			// leave it out, and the address patch that follows the
			// initialization changes no backend set, so nothing would
			// send it later.
			if id := c.listedProviderID(n); id != "" {
				named := *n // a shallow copy: the cached Node stays as it is
				named.Spec.ProviderID = id
				if addrs, changed, err := nodectl.DesiredAddresses(n, c.listedAddresses(n)); err == nil && changed {
					named.Status.Addresses = addrs // a new slice: the cached one is untouched
				}
				n = &named
			}
		}
		observed = append(observed, n)
	}
	nodes, recheck = selectBackends(c.opts.Clock.Now(), c.opts.NodeInitWait, observed)
	return nodes, recheck, nil
}

// nodeIndex holds the informer's Node objects themselves, not copies, as
// its event handler receives them: with thousands of nodes, a copy of every
// Node per backend computation and busy worker was most of the controller's
// memory. Nobody may modify them.
type nodeIndex struct {
	mu    sync.RWMutex
	nodes map[string]*v1.Node
	reg   toolscache.ResourceEventHandlerRegistration
}

// newNodeIndex registers an index with the manager cache's Node informer.
func newNodeIndex(ctx context.Context, informers cache.Informers) (*nodeIndex, error) {
	// Not blocking: list reports "not synced" until the index is.
	inf, err := informers.GetInformer(ctx, &v1.Node{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	x := &nodeIndex{nodes: map[string]*v1.Node{}}
	x.reg, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    x.put,
		UpdateFunc: func(_, obj any) { x.put(obj) },
		DeleteFunc: x.remove,
	})
	if err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	return x, nil
}

func (x *nodeIndex) put(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		x.mu.Lock()
		x.nodes[n.Name] = n
		x.mu.Unlock()
	}
}

func (x *nodeIndex) remove(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*v1.Node); ok {
		x.mu.Lock()
		delete(x.nodes, n.Name)
		x.mu.Unlock()
	}
}

// list returns every Node, once the index has received the informer's
// initial list.
func (x *nodeIndex) list() ([]*v1.Node, error) {
	if !x.reg.HasSynced() {
		return nil, errors.New("list nodes: the node cache is not synced yet")
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*v1.Node, 0, len(x.nodes))
	for _, n := range x.nodes {
		out = append(out, n)
	}
	return out, nil
}

// listedProviderID is the provider ID that node's provider's cached instance
// listing gives it ("" when none does).
func (c *Controller) listedProviderID(node *v1.Node) string {
	if p := c.clouds.ForNode(node); p != nil {
		return p.ListedProviderID(node)
	}
	return ""
}

// listedAddresses are the addresses node's provider's cached instance listing
// reports for a node not initialized yet (nil when none does).
func (c *Controller) listedAddresses(node *v1.Node) []v1.NodeAddress {
	if p := c.clouds.ForNode(node); p != nil {
		return p.ListedAddresses(node)
	}
	return nil
}

// knownGone reports whether the provider that owns node knows its machine is
// gone (without asking the cloud).
func (c *Controller) knownGone(node *v1.Node) bool {
	p := c.clouds.ForNode(node)
	return p != nil && p.KnownGone(node)
}

// joining reports whether the node controller has yet to initialize node
// and the controller knows no provider ID for it: it has the uninitialized
// taint and no provider ID.
func joining(node *v1.Node) bool {
	return node.Spec.ProviderID == "" && slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool {
		return t.Key == cloudproviderapi.TaintExternalCloudProvider
	})
}

// nodeSyncer runs one backend update pass per window.
type nodeSyncer struct{ *Controller }

// Reconcile updates the backends of every ensured load balancer whose backend set
// changed since it was last synced, Workers at a time. Services whose update
// failed are handed to the service workers for a full ensure.
//
// Each update is sent the newest backend set: when nodes changed while the
// pass ran (a pass over many load balancers of a slow cloud can outlast a
// burst of joining nodes), the set is computed again before the next update
// goes out, so the later load balancers of the pass get the nodes that joined
// meanwhile and the pass those changes start has only the earlier ones to do.
// It is computed at most once per NodeUpdateWindow: every load balancer keeps
// the set it was sent until the next pass, and a set per update while
// thousands of nodes join would be thousands of sets of thousands of nodes.
func (s nodeSyncer) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	start := s.opts.Clock.Now()
	if wait := s.burst.hold(start, s.opts.NodeUpdateWindow); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	defer func() { nodeSyncLatency.Observe(s.opts.Clock.Since(start).Seconds()) }()
	seen, computed := s.burst.changes(), start
	nodes, recheck, err := s.backends(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	set := s.sets.share(newNodeSet(nodes))
	holdAdds, requeue := s.pass.holdAdds(start, s.opts.NodeInitWait, recheck)
	g, gctx := errgroup.WithContext(ctx)
	// A slot is taken before the set is looked at, so that an update waiting
	// for a worker does not go out with the set of when it started waiting.
	slots := make(chan struct{}, s.opts.Workers)
	updated := false
	for _, key := range s.cache.keys() {
		var svc v1.Service
		if err := s.client.Get(ctx, key, &svc); err != nil {
			continue // gone: the service workers clean up
		}
		if s.clouds.ForService(&svc) == nil || !wantsLB(&svc) {
			continue
		}
		slots <- struct{}{}
		if now := s.opts.Clock.Now(); now.Sub(computed) >= s.opts.NodeUpdateWindow {
			if seq := s.burst.changes(); seq != seen {
				if fresh, _, err := s.backends(ctx); err == nil {
					nodes, set, seen, computed = fresh, s.sets.share(newNodeSet(fresh)), seq, now
				}
			}
		}
		if !updatesBackends(holdAdds, s.cache.nodesOf(key), set) {
			<-slots
			continue
		}
		entry, changed := s.cache.swapNodes(key, svc.UID, set)
		if !changed {
			<-slots
			continue
		}
		updated = true
		sent := nodes // the set swapNodes recorded, whatever later iterations compute
		g.Go(func() error {
			defer func() { <-slots }()
			s.updateBackends(gctx, &svc, entry, sent)
			return nil
		})
	}
	_ = g.Wait()
	if updated {
		backendBatches.Inc()
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// updateBackends sends one load balancer its new backend set. It holds the
// Service's lock, and reads the Service again under it: a sync that ran
// meanwhile may have changed the load balancer from a newer Service.
func (s nodeSyncer) updateBackends(ctx context.Context, svc *v1.Service, entry svcState, nodes []*v1.Node) {
	key := client.ObjectKeyFromObject(svc)
	defer s.locks.lock(key)()
	fresh := &v1.Service{}
	if err := s.client.Get(ctx, key, fresh); err != nil || fresh.UID != svc.UID || !wantsLB(fresh) || needsCleanup(fresh) {
		return // gone or changed kind: the service workers handle it
	}
	svc = fresh
	logger := log.FromContext(ctx).WithValues("service", key, "provider", entry.provider.Name())
	lb, _ := entry.provider.LoadBalancer()
	ctx = cloud.WithPriority(ctx, cloud.PriorityLBUpdate)
	lbSyncTotal.Inc()
	start := s.opts.Clock.Now()
	err := lb.UpdateLoadBalancer(ctx, s.opts.ClusterName, svc, nodes)
	updateHostLatency.Observe(s.opts.Clock.Since(start).Seconds())
	switch {
	case err == nil:
		if len(nodes) == 0 {
			s.recorder.Event(svc, v1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
		} else {
			s.recorder.Event(svc, v1.EventTypeNormal, "UpdatedLoadBalancer", "Updated load balancer with new hosts")
		}
		// The condition follows the backend count (NoBackends <-> Ready).
		if err := s.setReadyCondition(ctx, svc, entry, nodes); err != nil {
			logger.Error(err, "update LoadBalancerReady condition")
		}
		return
	case errors.Is(err, cloudprovider.ImplementedElsewhere):
		return
	}
	if _, exists, getErr := lb.GetLoadBalancer(ctx, s.opts.ClusterName, svc); getErr == nil && !exists {
		// Nothing to update: the next ensure creates it with the then-current nodes.
		return
	}
	var retryErr *cloudproviderapi.RetryError
	if errors.As(err, &retryErr) {
		// The cloud is applying this change or one before it (Octavia
		// answers 409 while a load balancer is PENDING_UPDATE, and takes
		// one change at a time): progress, not a failure, so no Warning.
		// The full ensure carries it to the end, requeued by its delay.
		logger.V(1).Info("load balancer busy applying a change; finishing the backend update with a full ensure", "reason", err.Error(), "after", retryErr.RetryAfter())
	} else {
		nodeSyncErrors.Inc()
		s.recorder.Eventf(svc, v1.EventTypeWarning, "UpdateLoadBalancerFailed",
			"Error updating load balancer with new hosts %s, error: %v", eventHosts(nodes), err)
		logger.Error(err, "update load balancer backends; retrying with a full ensure")
	}
	// Forget the recorded set so that the next pass retries too if the ensure fails.
	s.cache.update(key, func(e *svcState) {
		if e.svc != nil && e.svc.UID == svc.UID {
			e.nodes = nil
		}
	})
	s.retry(ctx, svc)
}

// maxNodeNames limits the node names in an UpdateLoadBalancerFailed event.
const maxNodeNames = 20

// eventHosts lists nodes for an UpdateLoadBalancerFailed event: the sorted
// names of the first maxNodeNames and, when there are more, "<N more>" and
// upstream's "[node names limited, total number of nodes: N]".
func eventHosts(nodes []*v1.Node) string {
	shown := nodes[:min(len(nodes), maxNodeNames)]
	names := make([]string, 0, len(shown)+1)
	for _, n := range shown {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	if len(nodes) <= maxNodeNames {
		return fmt.Sprint(names)
	}
	names = append(names, fmt.Sprintf("<%d more>", len(nodes)-maxNodeNames))
	return fmt.Sprintf("%v [node names limited, total number of nodes: %d]", names, len(nodes))
}
