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
	if !p.waitOnePeriod(ctx) {
		return nil
	}
	orphans := map[orphanKey]time.Time{}
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		p.checkDrift(ctx)
		p.removeOrphans(ctx, orphans, time.Now())
	}, p.opts.ResyncPeriod, 0.1, false)
	return nil
}

func (p *periodic) waitOnePeriod(ctx context.Context) bool {
	// Waiting for the first period also lets the service workers fill the cache.
	t := time.NewTimer(p.opts.ResyncPeriod)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// checkDrift asks the cloud about every ensured load balancer and hands the ones
// that are missing or whose status differs from the Service's to the workers.
func (p *periodic) checkDrift(ctx context.Context) {
	logger := log.FromContext(ctx)
	ctx = cloud.WithPriority(ctx, cloud.PriorityRefresh)
	for _, key := range p.cache.keys() {
		entry, ok := p.cache.get(key)
		if !ok || !entry.ensured || entry.elsewhere {
			continue
		}
		var svc v1.Service
		if err := p.client.Get(ctx, key, &svc); err != nil || svc.UID != entry.svc.UID || !wantsLB(&svc) || needsCleanup(&svc) {
			continue // the workers handle changes of the Service itself
		}
		lb, _ := entry.provider.LoadBalancer()
		status, exists, err := lb.GetLoadBalancer(ctx, p.opts.ClusterName, &svc)
		var reason string
		switch {
		case err != nil:
			logger.Error(err, "drift check: get load balancer", "service", key, "provider", entry.provider.Name())
			continue
		case !exists:
			reason = "missing"
		case status == nil || !sameAddresses(status, &svc.Status.LoadBalancer):
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
// does not return are never touched.
func (p *periodic) removeOrphans(ctx context.Context, seen map[orphanKey]time.Time, now time.Time) {
	logger := log.FromContext(ctx)
	ctx = cloud.WithPriority(ctx, cloud.PriorityRefresh)
	candidates := map[orphanKey]bool{}
	for _, prov := range p.clouds.Providers() {
		if !supportsLB(prov) {
			continue
		}
		refs, ok, err := prov.ListLoadBalancers(ctx, p.opts.ClusterName)
		if !ok {
			continue
		}
		if err != nil {
			// Keep what we know: a failed listing neither starts nor resets clocks.
			logger.Error(err, "orphan scan: list load balancers", "provider", prov.Name())
			for k := range seen {
				if k.provider == prov.Name() {
					candidates[k] = true
				}
			}
			continue
		}
		for _, ref := range refs {
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
