package service

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/pkg/annotations"
	"github.com/stratus-ccm/stratus/pkg/echo"
	"github.com/stratus-ccm/stratus/pkg/stratus"
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

// sync is Reconcile under the Service's lock: it observes the Service, plans
// (planSync) and applies the step.
func (c *Controller) sync(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &v1.Service{}
	var obs syncObs
	if err := c.client.Get(ctx, req.NamespacedName, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("get service %s: %w", req.NamespacedName, err)
		}
	} else {
		obs.found = true
	}
	var p *cloud.Provider
	if obs.found {
		p = c.clouds.ForService(svc)
		obs.served = p != nil && supportsLB(p)
		old, seen := c.cache.get(req.NamespacedName)
		obs.known = seen && old.svc != nil // synced before in this process
		if obs.known {
			obs.recreated, obs.knownWantedLB = old.svc.UID != svc.UID, wantsLB(old.svc)
		}
		obs.wantsLB, obs.cleanup = wantsLB(svc), needsCleanup(svc)
	}
	d := planSync(obs)
	if d.step == stepDeleteVanished || d.deleteOld {
		// Gone, or recreated under the same name: the old incarnation's
		// load balancer goes first.
		if err := c.deleteVanished(ctx, req.NamespacedName); err != nil || d.step == stepDeleteVanished {
			return reconcile.Result{}, err
		}
	}
	if d.step == stepNone {
		return reconcile.Result{}, nil
	}
	c.cache.remember(svc.DeepCopy(), p)
	if d.step == stepCleanup {
		if err := c.cleanup(ctx, svc, p); err != nil {
			c.recorder.Eventf(svc, v1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
			return reconcile.Result{}, err
		}
		c.cache.delete(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	return c.ensure(ctx, svc, p, d.firstSight)
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
		controllerutil.RemoveFinalizer(s, Finalizer)
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
		logger.Info("invalid configuration; waiting for the Service to change",
			"annotations", shortenAll(annotations.InvalidNames(err)), "error", echo.Shorten(err.Error(), echo.MaxMessage))
		return c.apply(ctx, svc, p, planInvalid(err))
	}

	// A joining node left out here is added by the node syncer, which
	// its initialization (or the end of its wait) triggers.
	nodes, _, err := c.backends(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	set := c.sets.share(newNodeSet(nodes))
	fp := fingerprint(p.Name(), svc)
	st, _ := c.cache.get(key)
	switch planEnsure(st, firstSight, adoptable(svc, fp), fp, set) {
	case ensureAdopt:
		// The condition says nothing of the backends the load balancer
		// has: they may have changed while no controller ran. The node
		// syncer sends them once (one update, no Ensure).
		c.cache.update(key, func(e *svcState) {
			e.nodes, e.unverified, e.phase = set, true, phaseEnsured
			e.ensuredFrom(svc)
		})
		logger.V(1).Info("load balancer already ensured from this configuration; adopted without a cloud call, its backends are sent by the next backend pass")
		c.verifyBackends(ctx, svc)
		return reconcile.Result{}, nil
	case ensureAskListing:
		// An Ensure of this very configuration answered "provisioning": a
		// shared listing tells whether it is done, without another Ensure
		// per Service.
		state, status, wait := c.provisioning.state(ctx, p, c.opts.ClusterName, svc.UID, st.provisioning.due)
		if plan := planListing(c.opts.Clock.Now(), st, state, status, wait, len(nodes), fp); plan != nil {
			logger.V(1).Info("load balancer provisioning; the listing answered", "answer", state)
			return c.apply(ctx, svc, p, plan)
		}
	}

	c.recorder.Event(svc, v1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer")
	// Without our finalizer, which goes on before the first Ensure and off
	// only after the load balancer is deleted, no load balancer exists: the
	// provider may create it without a lookup (it copes if one exists).
	absent := false
	svc, err = c.patchService(ctx, svc, false, func(s *v1.Service) {
		absent = controllerutil.AddFinalizer(s, Finalizer)
	})
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("add finalizer to service %s: %w", key, err)
	}
	if len(nodes) == 0 {
		c.recorder.Event(svc, v1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
	}
	now := c.opts.Clock.Now()
	c.cache.update(key, func(e *svcState) {
		e.nodes, e.unverified = set, false
		if e.firstEnsure.IsZero() {
			e.firstEnsure = now
		}
	})

	lb, _ := p.LoadBalancer()
	ectx := cloud.WithPriority(ctx, cloud.PriorityLBWrite)
	if absent {
		ectx = stratus.WithLoadBalancerAbsent(ectx)
	}
	status, err := lb.EnsureLoadBalancer(ectx, c.opts.ClusterName, svc, nodes)
	var retryErr *cloudproviderapi.RetryError
	if errors.As(err, &retryErr) {
		logger.V(1).Info("load balancer provisioning; checking again later", "after", retryErr.RetryAfter())
	}
	plan := planEnsureResult(c.opts.Clock.Now(), key.String(), status, err, hasReadyCondition(svc), set, fp, fingerprint(p.Name(), svc))
	return c.apply(ctx, svc, p, plan)
}

// apply carries out a plan for svc, served by p, in order, and feeds the
// outcomes into svc's state. A failed write ends it with the error.
func (c *Controller) apply(ctx context.Context, svc *v1.Service, p *cloud.Provider, plan []action) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(svc)
	var res reconcile.Result
	for _, a := range plan {
		switch a.kind {
		case actEvent:
			c.recorder.Event(svc, a.eventType, a.reason, a.message)
		case actCondition:
			if err := c.setCondition(ctx, svc, a.cond); err != nil {
				if !a.bestEffort {
					return reconcile.Result{}, err
				}
				log.FromContext(ctx).Error(err, "set LoadBalancerReady condition")
			}
		case actProvisioning:
			c.cache.update(key, func(e *svcState) { e.provisioning = a.wait })
		case actElsewhere:
			c.cache.update(key, func(e *svcState) { e.phase = phaseElsewhere })
		case actPublish:
			if err := c.publish(ctx, svc, p, a.status, a.cond); err != nil {
				return reconcile.Result{}, err
			}
		case actRequeue:
			res.RequeueAfter = a.after
		case actFail:
			return reconcile.Result{}, a.err
		}
	}
	return res, nil
}

// publish records svc's load balancer ensured with status (an Ensure's answer,
// or a listing's once provisioning finished) in its state, and publishes the
// status and the Ready condition cond on the Service.
func (c *Controller) publish(ctx context.Context, svc *v1.Service, p *cloud.Provider, status *v1.LoadBalancerStatus, cond metav1.Condition) error {
	key := client.ObjectKeyFromObject(svc)
	entry, _ := c.cache.get(key)
	c.cache.update(key, func(e *svcState) {
		e.phase, e.provisioning = phaseEnsured, provisioningWait{}
		e.ensuredFrom(svc)
	})
	hadIngress := len(svc.Status.LoadBalancer.Ingress) > 0
	want := normalizeStatus(status)
	if _, err := c.patchService(ctx, svc, true, func(s *v1.Service) {
		if !ingressEqual(&s.Status.LoadBalancer, want) {
			s.Status.LoadBalancer = *want.DeepCopy()
		}
		setCondition(&s.Status.Conditions, cond)
	}); err != nil {
		return fmt.Errorf("update status of service %s: %w", key, err)
	}
	if !hadIngress && len(want.Ingress) > 0 && !entry.firstEnsure.IsZero() {
		provisioningLatency.WithLabelValues(p.Name()).Observe(c.opts.Clock.Since(entry.firstEnsure).Seconds())
	}
	return nil
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
