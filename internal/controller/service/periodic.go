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
	pcp "github.com/stratus-ccm/stratus/pkg/cloudprovider"
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
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		ctx = cloud.WithPriority(ctx, cloud.PriorityRefresh)
		listings := p.list(ctx)
		p.checkDrift(ctx, listings)
		p.removeOrphans(ctx, listings, orphans, time.Now())
	}, p.opts.ResyncPeriod, 0.1, false)
	return nil
}

// listing is one provider's answer to ListLoadBalancers.
type listing struct {
	refs  []pcp.LoadBalancerRef
	byUID map[types.UID]pcp.LoadBalancerRef
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
		l := &listing{refs: refs, err: err, byUID: make(map[types.UID]pcp.LoadBalancerRef, len(refs))}
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
	t := time.NewTimer(min(p.opts.ResyncPeriod, firstCheckDelay))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
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
		if !ok || !entry.ensured || entry.elsewhere {
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
			var ref pcp.LoadBalancerRef
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
		var reason string
		switch {
		case !exists:
			reason = "missing"
		case status != nil && !sameAddresses(status, &svc.Status.LoadBalancer):
			reason = "address"
		default:
			continue
		}
		logger.Info("load balancer drifted; re-ensuring", "service", key, "provider", entry.provider.Name(), "reason", reason)
		driftRepairs.WithLabelValues(entry.provider.Name(), reason).Inc()
		p.retry(ctx, &svc)
	}
}

// orphanKey identifies a listed load balancer.
type orphanKey struct {
	provider string
	name     string
}

// removeOrphans deletes the load balancers the providers list as this cluster's
// whose Service (same namespace, name and UID) has been gone for the grace period.
// seen remembers when each candidate was first found; load balancers a listing
// does not return are never touched, and a failed listing deletes nothing.
func (p *periodic) removeOrphans(ctx context.Context, listings map[*cloud.Provider]*listing, seen map[orphanKey]time.Time, now time.Time) {
	logger := log.FromContext(ctx)
	candidates := map[orphanKey]bool{}
	for prov, l := range listings {
		if l.err != nil {
			// Keep what we know: a failed listing neither starts nor resets clocks.
			for k := range seen {
				if k.provider == prov.Name() {
					candidates[k] = true
				}
			}
			continue
		}
		for _, ref := range l.refs {
			if p.serviceExists(ctx, ref) {
				continue
			}
			k := orphanKey{prov.Name(), ref.Name}
			candidates[k] = true
			first, ok := seen[k]
			if !ok {
				seen[k] = now
				logger.Info("load balancer has no Service; deleting it after the grace period", "provider", prov.Name(),
					"loadBalancer", ref.Name, "service", types.NamespacedName{Namespace: ref.ServiceNamespace, Name: ref.ServiceName},
					"uid", ref.ServiceUID, "grace", p.opts.OrphanGracePeriod)
				first = now
			}
			if now.Sub(first) < p.opts.OrphanGracePeriod {
				continue
			}
			if p.deleteOrphan(ctx, prov, ref) {
				delete(candidates, k)
			}
		}
	}
	for k := range seen {
		if !candidates[k] {
			delete(seen, k)
		}
	}
}

// serviceExists reports whether ref's Service still exists with the same UID. A
// Service the cache does not have is confirmed against the API server before
// anything is deleted; an unanswered question counts as "exists".
func (p *periodic) serviceExists(ctx context.Context, ref pcp.LoadBalancerRef) bool {
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
func (p *periodic) deleteOrphan(ctx context.Context, prov *cloud.Provider, ref pcp.LoadBalancerRef) bool {
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
