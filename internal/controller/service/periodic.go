package service

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// periodic runs the drift check and the orphan scan every resync period, on the
// leader only (it does not implement LeaderElectionRunnable, so the manager runs
// it under leader election).
type periodic struct{ *Controller }

// Start runs until ctx ends.
func (p *periodic) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName(Name))
	if !p.waitFirst(ctx) {
		return nil
	}
	orphans := map[orphanKey]time.Time{}
	for {
		// The period runs from each scan's start (with 10% jitter): a slow
		// scan is followed by the next one at once.
		t := p.opts.Clock.NewTimer(wait.Jitter(p.opts.ResyncPeriod, 0.1))
		sctx := cloud.WithPriority(ctx, cloud.PriorityRefresh)
		listings := p.list(sctx)
		p.checkDrift(sctx, listings)
		p.removeOrphans(sctx, listings, orphans, p.opts.Clock.Now())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// listing is one provider's answer to ListLoadBalancers.
type listing struct {
	refs  []stratus.LoadBalancerRef
	byUID map[types.UID]stratus.LoadBalancerRef
	err   error
}

// list asks every load-balancer provider that can list its load balancers for
// them, once per period; the drift check and the orphan scan share the answers.
func (p *periodic) list(ctx context.Context) map[*cloud.Provider]*listing {
	out := map[*cloud.Provider]*listing{}
	for _, prov := range p.clouds.Providers() {
		if !supportsLB(prov) {
			continue
		}
		refs, ok, err := prov.ListLoadBalancers(ctx, p.opts.ClusterName)
		if !ok {
			continue
		}
		l := &listing{refs: refs, err: err, byUID: make(map[types.UID]stratus.LoadBalancerRef, len(refs))}
		if err != nil {
			log.FromContext(ctx).Error(err, "list load balancers", "provider", prov.Name())
		}
		for _, r := range refs {
			l.byUID[r.ServiceUID] = r
		}
		out[prov] = l
	}
	return out
}

// firstCheckDelay bounds the wait before the first drift check, which verifies
// the load balancers adopted at start-up without a cloud call.
const firstCheckDelay = 30 * time.Second

func (p *periodic) waitFirst(ctx context.Context) bool {
	// The wait also lets the service workers fill the cache.
	t := p.opts.Clock.NewTimer(min(p.opts.ResyncPeriod, firstCheckDelay))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// checkDrift hands the ensured load balancers that are missing in the cloud, or
// whose addresses differ from the Service's ingress, to the workers. A provider's
// successful listing answers for all its load balancers at once (its status, when
// the listing carries one); otherwise each load balancer is asked for with
// GetLoadBalancer.
func (p *periodic) checkDrift(ctx context.Context, listings map[*cloud.Provider]*listing) {
	logger := log.FromContext(ctx)
	for _, key := range p.cache.keys() {
		entry, ok := p.cache.get(key)
		if !ok || entry.phase != phaseEnsured {
			continue
		}
		var svc v1.Service
		if err := p.client.Get(ctx, key, &svc); err != nil || svc.UID != entry.svc.UID || !wantsLB(&svc) || needsCleanup(&svc) {
			continue // the workers handle changes of the Service itself
		}
		var (
			status *v1.LoadBalancerStatus
			exists bool
		)
		if l := listings[entry.provider]; l != nil && l.err == nil {
			var ref stratus.LoadBalancerRef
			ref, exists = l.byUID[svc.UID]
			status = ref.Status
		} else {
			lb, _ := entry.provider.LoadBalancer()
			var err error
			status, exists, err = lb.GetLoadBalancer(ctx, p.opts.ClusterName, &svc)
			if err != nil {
				logger.Error(err, "drift check: get load balancer", "service", key, "provider", entry.provider.Name())
				continue
			}
		}
		reason := driftReason(exists, status, &svc)
		if reason == "" {
			continue
		}
		logger.Info("load balancer drifted; re-ensuring", "service", key, "provider", entry.provider.Name(), "reason", reason)
		driftRepairs.WithLabelValues(entry.provider.Name(), reason).Inc()
		p.retry(ctx, &svc)
	}
}

// removeOrphans deletes the load balancers the providers list as this cluster's
// whose Service (same namespace, name and UID) has been gone for the grace period
// (planOrphans). seen remembers when each candidate was first found; load
// balancers a listing does not return are never touched, and a failed listing
// deletes nothing.
func (p *periodic) removeOrphans(ctx context.Context, listings map[*cloud.Provider]*listing, seen map[orphanKey]time.Time, now time.Time) {
	logger := log.FromContext(ctx)
	failed := map[string]bool{}
	providers := map[string]*cloud.Provider{}
	var gone []orphan
	for prov, l := range listings {
		providers[prov.Name()] = prov
		if l.err != nil {
			failed[prov.Name()] = true
			continue
		}
		for _, ref := range l.refs {
			if !p.serviceExists(ctx, ref) {
				gone = append(gone, orphan{provider: prov.Name(), ref: ref})
			}
		}
	}
	announce, remove := planOrphans(now, p.opts.OrphanGracePeriod, seen, failed, gone)
	for _, o := range announce {
		logger.Info("load balancer has no Service; deleting it after the grace period", "provider", o.provider,
			"loadBalancer", o.ref.Name, "service", types.NamespacedName{Namespace: o.ref.ServiceNamespace, Name: o.ref.ServiceName},
			"uid", o.ref.ServiceUID, "grace", p.opts.OrphanGracePeriod)
	}
	for _, o := range remove {
		if p.deleteOrphan(ctx, providers[o.provider], o.ref) {
			delete(seen, o.key())
		}
	}
}

// serviceExists reports whether ref's Service still exists with the same UID. A
// Service the cache does not have is confirmed against the API server before
// anything is deleted; an unanswered question counts as "exists".
func (p *periodic) serviceExists(ctx context.Context, ref stratus.LoadBalancerRef) bool {
	key := types.NamespacedName{Namespace: ref.ServiceNamespace, Name: ref.ServiceName}
	var svc v1.Service
	err := p.client.Get(ctx, key, &svc)
	if err == nil && svc.UID == ref.ServiceUID {
		return true
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return true
	}
	err = p.reader.Get(ctx, key, &svc)
	if apierrors.IsNotFound(err) {
		return false
	}
	return err != nil || svc.UID == ref.ServiceUID
}

// deleteOrphan deletes the orphan ref through the provider, with a Service
// rebuilt from the reference. It reports success.
func (p *periodic) deleteOrphan(ctx context.Context, prov *cloud.Provider, ref stratus.LoadBalancerRef) bool {
	logger := log.FromContext(ctx).WithValues("provider", prov.Name(), "loadBalancer", ref.Name,
		"service", types.NamespacedName{Namespace: ref.ServiceNamespace, Name: ref.ServiceName}, "uid", ref.ServiceUID)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.ServiceNamespace, Name: ref.ServiceName, UID: ref.ServiceUID},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
	}
	lb, _ := prov.LoadBalancer()
	if err := lb.EnsureLoadBalancerDeleted(cloud.WithPriority(ctx, cloud.PriorityLBWrite), p.opts.ClusterName, svc); err != nil {
		logger.Error(err, "delete orphaned load balancer")
		return false
	}
	logger.Info("deleted orphaned load balancer: its Service is gone")
	orphansDeleted.WithLabelValues(prov.Name()).Inc()
	return true
}
