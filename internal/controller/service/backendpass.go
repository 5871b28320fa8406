package service

// The coalescing backend pass: the node syncer's single work item, which
// sends every ensured load balancer whose backend set changed its new set
// with UpdateLoadBalancer, at most once per window, and hands failures to the
// service workers.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// nodeSyncer runs one backend update pass per window.
type nodeSyncer struct{ *Controller }

// Reconcile updates the backends of every ensured load balancer whose backend set
// changed since it was last synced, Workers at a time. Services whose update
// failed are handed to the service workers for a full ensure.
//
// The backend pools of providers that keep them (stratus.BackendPools) are
// sent first, one UpdateBackendPool per pool whose members changed; the
// load balancers that target those pools then follow without a call of
// their own (one whose pools' keys changed gets an UpdateLoadBalancer). A
// pool whose update failed leaves the load balancers that target it as
// they were recorded, and the pass ends with the error, so that it runs
// again.
//
// Each update is sent the newest backend set: when nodes changed while the
// pass ran (a pass over many load balancers of a slow cloud can outlast a
// burst of joining nodes), the set is computed again before the next update
// goes out, so the later load balancers of the pass get the nodes that joined
// meanwhile and the pass those changes start has only the earlier ones to do.
// It is computed at most once per NodeUpdateWindow: every load balancer keeps
// the set it was sent until the next pass, and a set per update while
// thousands of nodes join would be thousands of sets of thousands of nodes.
// A pooled load balancer is recorded with the set its pools were sent.
//
// A load balancer adopted at start-up (its backends unknown to this
// process) whose provider's listing carries backends digests
// (stratus.BackendsDigester) is checked against one listing per pass: only
// those whose digest differs from the one for the new set are updated. A
// failed listing, or one without the load balancer, leaves the update to be
// sent.
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
	pooling, poolErr := s.sendPools(ctx, nodes, set, holdAdds)
	listed := &listedBackends{pass: s}
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
		p := s.clouds.ForService(&svc)
		if p == nil || !wantsLB(&svc) {
			continue
		}
		pp := pooling[p.Name()]
		pooled := pp != nil && pp.pools.UsesBackendPools(&svc)
		if pooled && pp.failed {
			continue // its pools' members are in doubt: the pass runs again
		}
		slots <- struct{}{}
		if now := s.opts.Clock.Now(); !pooled && now.Sub(computed) >= s.opts.NodeUpdateWindow {
			if seq := s.burst.changes(); seq != seen {
				if fresh, _, err := s.backends(ctx); err == nil {
					nodes, set, seen, computed = fresh, s.sets.share(newNodeSet(fresh)), seq, now
				}
			}
		}
		sent, sentSet, keys := nodes, set, "" // what swapNodes records, whatever later iterations compute
		if pooled {
			sent, sentSet, keys = pp.nodes, pp.set, pp.keys
		}
		if !updatesBackends(holdAdds, s.cache.nodesOf(key), sentSet) {
			<-slots
			continue
		}
		entry, changed := s.cache.swapNodes(key, svc.UID, sentSet, keys)
		if !changed {
			<-slots
			continue
		}
		if (pooled && entry.poolKeys == keys) || (entry.unverified && listed.current(ctx, s.opts.ClusterName, &svc, entry.provider, sent, pp != nil)) {
			// Its pools have the new members, or the listing shows that
			// the load balancer adopted at start-up targets them already:
			// nothing to send.
			g.Go(func() error {
				defer func() { <-slots }()
				s.served(gctx, &svc, entry, sent)
				return nil
			})
			continue
		}
		updated = true
		g.Go(func() error {
			defer func() { <-slots }()
			s.updateBackends(gctx, &svc, entry, sent, pp != nil)
			return nil
		})
	}
	_ = g.Wait()
	if updated {
		backendBatches.Inc()
	}
	if poolErr != nil {
		return reconcile.Result{}, poolErr
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// providerPools is a pass's view of one provider's backend pools: the
// pools, the backends their partition was made of (nodes, set), the keys of
// that partition, and whether an update of one of them failed.
type providerPools struct {
	pools  stratus.BackendPools
	nodes  []*v1.Node
	set    nodeSet
	keys   string
	failed bool
}

// sendPools sends the backend pools of the providers that keep them what
// planPools plans for the backends nodes (set), Workers at a time, and
// records what was sent. It returns each such provider's view by name, and
// the errors of the updates that failed: any error (a 5xx, a timeout)
// leaves the pool unknown, to be sent again.
func (s nodeSyncer) sendPools(ctx context.Context, nodes []*v1.Node, set nodeSet, hold bool) (map[string]*providerPools, error) {
	byName := map[string]*providerPools{}
	partitions := map[string]map[string][]*v1.Node{}
	for _, p := range s.clouds.Providers() {
		pools, ok := p.BackendPools()
		if !ok {
			continue
		}
		partition := pools.PoolsOf(nodes)
		partitions[p.Name()] = partition
		byName[p.Name()] = &providerPools{pools: pools, nodes: nodes, set: set, keys: poolKeysOf(partition)}
	}
	if s.pass.pools == nil {
		s.pass.pools = map[poolRef]nodeSet{}
	}
	updates := planPools(partitions, s.pass.pools, hold)
	errs := make([]error, len(updates))
	var g errgroup.Group
	g.SetLimit(s.opts.Workers)
	ctx = cloud.WithPriority(ctx, cloud.PriorityLBUpdate)
	for i, u := range updates {
		g.Go(func() error {
			errs[i] = byName[u.ref.provider].pools.UpdateBackendPool(ctx, s.opts.ClusterName, u.ref.key, u.nodes)
			return nil
		})
	}
	_ = g.Wait()
	var failed []error
	for i, u := range updates {
		_, current := partitions[u.ref.provider][u.ref.key]
		switch {
		case errs[i] != nil:
			delete(s.pass.pools, u.ref)
			byName[u.ref.provider].failed = true
			nodeSyncErrors.Inc()
			err := fmt.Errorf("update backend pool %q of provider %s: %w", u.ref.key, u.ref.provider, errs[i])
			log.FromContext(ctx).Error(err, "backend pool not updated; the load balancers that target it wait for the next pass", "members", len(u.nodes))
			failed = append(failed, err)
		case current:
			s.pass.pools[u.ref] = u.set
		default:
			delete(s.pass.pools, u.ref) // emptied, and no longer in the partition
		}
	}
	if len(updates) > 0 && len(failed) < len(updates) {
		poolUpdates.Add(float64(len(updates) - len(failed)))
	}
	return byName, errors.Join(failed...)
}

// served records that svc's load balancer serves nodes without an update
// of its own: through its backend pools, which a pass just sent, or because
// a listing shows it targets them already. Its Ready condition follows the
// backend count, as after an UpdateLoadBalancer.
func (s nodeSyncer) served(ctx context.Context, svc *v1.Service, entry svcState, nodes []*v1.Node) {
	key := client.ObjectKeyFromObject(svc)
	defer s.locks.lock(key)()
	fresh := &v1.Service{}
	if err := s.client.Get(ctx, key, fresh); err != nil || fresh.UID != svc.UID || !wantsLB(fresh) || needsCleanup(fresh) {
		return
	}
	if err := s.setReadyCondition(ctx, fresh, entry, nodes); err != nil {
		log.FromContext(ctx).Error(err, "update LoadBalancerReady condition", "service", key)
	}
}

// updateBackends sends one load balancer its new backend set. It holds the
// Service's lock, and reads the Service again under it: a sync that ran
// meanwhile may have changed the load balancer from a newer Service.
// pooled: the provider keeps backend pools, whose members the update must
// leave alone (stratus.WithBackendPoolsManaged).
func (s nodeSyncer) updateBackends(ctx context.Context, svc *v1.Service, entry svcState, nodes []*v1.Node, pooled bool) {
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
	if pooled {
		ctx = stratus.WithBackendPoolsManaged(ctx)
	}
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
			e.nodes, e.poolKeys = nil, ""
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

// listedBackends is a pass's view of the providers' load-balancer listings,
// taken the first time an adopted load balancer of the provider is checked
// (at most one listing per provider and pass): each load balancer's
// backends digest by Service UID, nil for a provider whose listing failed or
// carries no digests.
type listedBackends struct {
	pass     nodeSyncer
	mu       sync.Mutex
	provider map[*cloud.Provider]map[types.UID]string
}

// current reports whether the listing shows that svc's load balancer
// targets nodes already: its provider can compute the digest for nodes
// (pooled: with stratus.WithBackendPoolsManaged, as the update would be
// sent) and the listed one equals it. Any doubt is false.
func (l *listedBackends) current(ctx context.Context, clusterName string, svc *v1.Service, p *cloud.Provider, nodes []*v1.Node, pooled bool) bool {
	if pooled {
		ctx = stratus.WithBackendPoolsManaged(ctx)
	}
	want, ok := p.BackendsDigest(ctx, clusterName, svc, nodes)
	if !ok || want == "" {
		return false
	}
	digests := l.of(ctx, p)
	return digests != nil && digests[svc.UID] == want
}

// of lists p's load balancers once per pass.
func (l *listedBackends) of(ctx context.Context, p *cloud.Provider) map[types.UID]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if digests, done := l.provider[p]; done {
		return digests
	}
	if l.provider == nil {
		l.provider = map[*cloud.Provider]map[types.UID]string{}
	}
	l.provider[p] = nil
	refs, ok, err := p.ListLoadBalancers(cloud.WithPriority(ctx, cloud.PriorityLBUpdate), l.pass.opts.ClusterName)
	if !ok || err != nil {
		if err != nil {
			log.FromContext(ctx).Error(err, "list load balancers to check the adopted ones' backends; updating them instead", "provider", p.Name())
		}
		return nil
	}
	digests := make(map[types.UID]string, len(refs))
	for _, r := range refs {
		if r.Backends != "" {
			digests[r.ServiceUID] = r.Backends
		}
	}
	l.provider[p] = digests
	return digests
}
