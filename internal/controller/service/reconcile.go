package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/echo"
	"github.com/stratus-ccm/stratus/pkg/annotations"
	pcp "github.com/stratus-ccm/stratus/pkg/cloudprovider"
)

// Reconcile syncs one Service's load balancer. It never waits for the cloud to
// finish provisioning: a RetryError requeues the Service after exactly its delay.
// A failed sync is remembered, so that the Service is synced again as soon as its
// provider recovers from an outage.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	defer c.locks.lock(req.NamespacedName)()
	res, err := c.sync(ctx, req)
	c.cache.setFailed(req.NamespacedName, err != nil)
	return res, err
}

// sync is Reconcile under the Service's lock.
func (c *Controller) sync(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &v1.Service{}
	if err := c.client.Get(ctx, req.NamespacedName, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("get service %s: %w", req.NamespacedName, err)
		}
		return reconcile.Result{}, c.deleteVanished(ctx, req.NamespacedName)
	}
	p := c.clouds.ForService(svc)
	if p == nil || !supportsLB(p) {
		return reconcile.Result{}, nil // another controller's class, or ours cannot do it
	}
	old, seen := c.cache.get(req.NamespacedName)
	known := seen && old.svc != nil // synced before in this process
	if known && old.svc.UID != svc.UID {
		// Recreated under the same name: the old incarnation's load balancer goes first.
		if err := c.deleteVanished(ctx, req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		}
		known = false
	}
	if !wantsLB(svc) && !needsCleanup(svc) && (!known || !wantsLB(old.svc)) {
		return reconcile.Result{}, nil
	}
	c.cache.remember(svc.DeepCopy(), p)

	if !wantsLB(svc) || needsCleanup(svc) {
		if err := c.cleanup(ctx, svc, p); err != nil {
			c.recorder.Eventf(svc, v1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
			return reconcile.Result{}, err
		}
		c.cache.delete(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	return c.ensure(ctx, svc, p, !known)
}

// deleteVanished deletes the load balancer of a Service that is gone (or was
// replaced by a new incarnation) as the cache last saw it.
func (c *Controller) deleteVanished(ctx context.Context, key types.NamespacedName) error {
	old, ok := c.cache.get(key)
	if !ok || old.svc == nil || !wantsLB(old.svc) {
		c.cache.delete(key)
		return nil
	}
	c.recorder.Event(old.svc, v1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
	lb, _ := old.provider.LoadBalancer()
	err := lb.EnsureLoadBalancerDeleted(cloud.WithPriority(ctx, cloud.PriorityLBWrite), c.opts.ClusterName, old.svc)
	if err != nil {
		c.recorder.Eventf(old.svc, v1.EventTypeWarning, "DeleteLoadBalancerFailed", "Error deleting load balancer: %v", err)
		return fmt.Errorf("delete load balancer of vanished service %s (uid %s): %w", key, old.svc.UID, err)
	}
	c.recorder.Event(old.svc, v1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	c.cache.delete(key)
	return nil
}

// cleanup deletes the load balancer of a Service that no longer wants one (or is
// being deleted), then removes the finalizer and clears the status.
func (c *Controller) cleanup(ctx context.Context, svc *v1.Service, p *cloud.Provider) error {
	key := client.ObjectKeyFromObject(svc)
	lb, _ := p.LoadBalancer()
	ctx = cloud.WithPriority(ctx, cloud.PriorityLBWrite)
	_, exists, err := lb.GetLoadBalancer(ctx, c.opts.ClusterName, svc)
	if err != nil {
		return fmt.Errorf("failed to check if load balancer exists before cleanup of service %s: %w", key, err)
	}
	if exists {
		c.recorder.Event(svc, v1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
		if err := lb.EnsureLoadBalancerDeleted(ctx, c.opts.ClusterName, svc); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
			return fmt.Errorf("delete load balancer of service %s: %w", key, err)
		}
	}
	svc, err = c.patchService(ctx, svc, false, func(s *v1.Service) {
		s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == Finalizer })
	})
	if err != nil {
		return fmt.Errorf("remove finalizer of service %s: %w", key, err)
	}
	c.recorder.Event(svc, v1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	if _, err := c.patchService(ctx, svc, true, func(s *v1.Service) {
		s.Status.LoadBalancer = v1.LoadBalancerStatus{}
		removeCondition(&s.Status.Conditions, ConditionLoadBalancerReady)
	}); err != nil {
		return fmt.Errorf("clear status of service %s: %w", key, err)
	}
	return nil
}

// ensure creates or updates the load balancer and publishes its status. On the
// first sync of a Service in this process (firstSight), a load balancer whose
// Ready condition says it was ensured from exactly the current configuration is
// adopted without calling the cloud; the next drift check verifies it.
func (c *Controller) ensure(ctx context.Context, svc *v1.Service, p *cloud.Provider, firstSight bool) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(svc)
	logger := log.FromContext(ctx).WithValues("provider", p.Name())

	if err := annotations.Validate(svc); err != nil {
		// Not retried: the Service's next change brings it back.
		c.recorder.Eventf(svc, v1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
		logger.Info("invalid configuration; waiting for the Service to change",
			"annotations", shortenAll(annotations.InvalidNames(err)), "error", echo.Shorten(err.Error(), echo.MaxMessage))
		return reconcile.Result{}, c.setCondition(ctx, svc, notReady(ReasonInvalidConfiguration, err))
	}

	// A joining node left out here is added by the node syncer, which
	// its initialization (or the end of its wait) triggers.
	nodes, _, err := c.backends(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	set := c.sets.share(newNodeSet(nodes))
	fp := fingerprint(p.Name(), svc, set)
	if firstSight && adoptable(svc, fp) {
		c.cache.update(key, func(e *cachedService) { e.nodes, e.ensured = set, true; e.ensuredFrom(svc) })
		logger.V(1).Info("load balancer already ensured from this configuration; adopted without a cloud call")
		return reconcile.Result{}, nil
	}

	// An Ensure of this very configuration answered "provisioning": a shared
	// listing tells whether it is done, without another Ensure per Service.
	if entry, _ := c.cache.get(key); entry.provisioning != "" && entry.provisioning == fp {
		switch state, status, wait := c.provisioning.state(ctx, p, c.opts.ClusterName, svc.UID, entry.provisioningDue); state {
		case lbWait:
			return reconcile.Result{RequeueAfter: wait}, nil
		case lbProvisioning:
			logger.V(1).Info("load balancer still provisioning (listing); checking again later", "after", entry.provisioningRetry)
			due := time.Now().Add(entry.provisioningRetry)
			c.cache.update(key, func(e *cachedService) { e.provisioningDue = due })
			return reconcile.Result{RequeueAfter: entry.provisioningRetry}, nil
		case lbActive:
			logger.V(1).Info("load balancer provisioned (listing)")
			return c.ensured(ctx, svc, p, status, len(nodes), set)
		}
	}

	c.recorder.Event(svc, v1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer")
	// Without our finalizer, which goes on before the first Ensure and off
	// only after the load balancer is deleted, no load balancer exists: the
	// provider may create it without a lookup (it copes if one exists).
	absent := false
	svc, err = c.patchService(ctx, svc, false, func(s *v1.Service) {
		absent = !slices.Contains(s.Finalizers, Finalizer)
		if absent {
			s.Finalizers = append(s.Finalizers, Finalizer)
		}
	})
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("add finalizer to service %s: %w", key, err)
	}
	if len(nodes) == 0 {
		c.recorder.Event(svc, v1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
	}
	now := time.Now()
	c.cache.update(key, func(e *cachedService) {
		e.nodes = set
		if e.firstEnsure.IsZero() {
			e.firstEnsure = now
		}
	})

	lb, _ := p.LoadBalancer()
	ectx := cloud.WithPriority(ctx, cloud.PriorityLBWrite)
	if absent {
		ectx = pcp.WithLoadBalancerAbsent(ectx)
	}
	status, err := lb.EnsureLoadBalancer(ectx, c.opts.ClusterName, svc, nodes)
	var retryErr *api.RetryError
	switch {
	case errors.Is(err, cloudprovider.ImplementedElsewhere):
		c.cache.update(key, func(e *cachedService) { e.elsewhere = true })
		return reconcile.Result{}, nil
	case errors.As(err, &retryErr):
		due := time.Now().Add(retryErr.RetryAfter())
		c.cache.update(key, func(e *cachedService) {
			e.provisioning, e.provisioningRetry, e.provisioningDue = fp, retryErr.RetryAfter(), due
		})
		// Progress, not a failure (upstream: Warning SyncLoadBalancerFailed).
		c.recorder.Eventf(svc, v1.EventTypeNormal, EventProvisioning, "Waiting for the cloud: %v", err)
		// A Service without the condition (a new one) gets it with its
		// status once provisioning ends: one status write instead of two.
		// One that has it must not keep saying Ready (or a stale error).
		if hasReadyCondition(svc) {
			if err := c.setCondition(ctx, svc, notReady(ReasonProvisioning, err)); err != nil {
				return reconcile.Result{}, err
			}
		}
		logger.V(1).Info("load balancer provisioning; checking again later", "after", retryErr.RetryAfter())
		return reconcile.Result{RequeueAfter: retryErr.RetryAfter()}, nil
	case err == nil && status == nil:
		err = errors.New("service status returned by EnsureLoadBalancer is nil")
		fallthrough
	case err != nil:
		c.cache.update(key, func(e *cachedService) { e.provisioning = "" })
		err = fmt.Errorf("ensure load balancer for service %s: %w", key, err)
		c.recorder.Eventf(svc, v1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
		if cerr := c.setCondition(ctx, svc, notReady(ReasonCloudError, err)); cerr != nil {
			logger.Error(cerr, "set LoadBalancerReady condition")
		}
		return reconcile.Result{}, err
	}
	return c.ensured(ctx, svc, p, status, len(nodes), set)
}

// ensured records a successful Ensure of svc's load balancer (status is its
// answer, or a listing's once provisioning finished): the event, the cache,
// and the Service's status and Ready condition.
func (c *Controller) ensured(ctx context.Context, svc *v1.Service, p *cloud.Provider, status *v1.LoadBalancerStatus, nodes int, set nodeSet) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(svc)
	c.recorder.Event(svc, v1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer")

	entry, _ := c.cache.get(key)
	c.cache.update(key, func(e *cachedService) {
		e.ensured, e.elsewhere, e.provisioning = true, false, ""
		e.ensuredFrom(svc)
	})
	hadIngress := len(svc.Status.LoadBalancer.Ingress) > 0
	want := normalizeStatus(status)
	cond := readyCondition(nodes, fingerprint(p.Name(), svc, set))
	if _, err := c.patchService(ctx, svc, true, func(s *v1.Service) {
		if !ingressEqual(&s.Status.LoadBalancer, want) {
			s.Status.LoadBalancer = *want.DeepCopy()
		}
		setCondition(&s.Status.Conditions, cond)
	}); err != nil {
		return reconcile.Result{}, fmt.Errorf("update status of service %s: %w", key, err)
	}
	if !hadIngress && len(want.Ingress) > 0 && !entry.firstEnsure.IsZero() {
		provisioningLatency.WithLabelValues(p.Name()).Observe(time.Since(entry.firstEnsure).Seconds())
	}
	return reconcile.Result{}, nil
}

// maxLoggedNames bounds how many annotation names a log line lists.
const maxLoggedNames = 10

// shortenAll returns at most maxLoggedNames of names, each shortened to
// echo.MaxName bytes, and how many were left out.
func shortenAll(names []string) []string {
	out := make([]string, 0, min(len(names), maxLoggedNames+1))
	for i, n := range names {
		if i == maxLoggedNames {
			out = append(out, fmt.Sprintf("(%d more)", len(names)-i))
			break
		}
		out = append(out, echo.Shorten(n, echo.MaxName))
	}
	return out
}
