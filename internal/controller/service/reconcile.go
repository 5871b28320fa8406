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
// (planService) and applies the plan.
func (c *Controller) sync(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o, err := c.observe(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	return c.apply(ctx, o, planService(c.opts.Clock.Now(), o))
}

// observe reads what planService needs: the Service and the state kept for
// key, then, as planSync decides, what a cleanup or an ensure reads. It writes
// nothing. Only an error reading the Service ends the sync before anything is
// planned; the errors of later reads are observations the plan turns into a
// failure (after remembering the Service).
func (c *Controller) observe(ctx context.Context, key types.NamespacedName) (*observation, error) {
	o := &observation{key: key}
	svc := &v1.Service{}
	if err := c.client.Get(ctx, key, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get service %s: %w", key, err)
		}
	} else {
		o.found, o.svc = true, svc
	}
	o.last, _ = c.cache.get(key)
	if !o.found {
		return o, nil
	}
	o.provider = c.clouds.ForService(svc)
	o.served = o.provider != nil && supportsLB(o.provider)
	o.known = o.last.svc != nil // synced before in this process
	if o.known {
		o.recreated, o.knownWantedLB = o.last.svc.UID != svc.UID, wantsLB(o.last.svc)
	}
	o.wantsLB, o.cleanup = wantsLB(svc), needsCleanup(svc)
	switch d := planSync(o.syncObs); d.step {
	case stepCleanup:
		if c.provisioning.listed(o.provider, svc.UID, absentListingAge) {
			o.exists = true // a recent listing has it: no lookup
			break
		}
		lb, _ := o.provider.LoadBalancer()
		_, o.exists, o.existsErr = lb.GetLoadBalancer(cloud.WithPriority(ctx, cloud.PriorityLBWrite), c.opts.ClusterName, svc)
	case stepEnsure:
		c.observeEnsure(ctx, o, d.firstSight)
	}
	return o, nil
}

// observeEnsure reads what an ensure needs: the annotations' validity, the
// backends, the configuration's fingerprint and, while an Ensure of it
// provisions, the shared listing's answer.
func (c *Controller) observeEnsure(ctx context.Context, o *observation, firstSight bool) {
	logger := log.FromContext(ctx).WithValues("provider", o.provider.Name())
	if err := annotations.Validate(o.svc); err != nil {
		logger.Info("invalid configuration; waiting for the Service to change",
			"annotations", shortenAll(annotations.InvalidNames(err)), "error", echo.Shorten(err.Error(), echo.MaxMessage))
		o.invalid = err
		return
	}
	// A joining node left out here is added by the node syncer, which
	// its initialization (or the end of its wait) triggers.
	nodes, _, err := c.backends(ctx)
	if err != nil {
		o.nodesErr = err
		return
	}
	o.nodes, o.set = nodes, c.sets.share(newNodeSet(nodes))
	if pools, ok := o.provider.BackendPools(); ok {
		o.pooled = true
		if pools.UsesBackendPools(o.svc) {
			o.poolKeys = poolKeysOf(pools.PoolsOf(nodes))
		}
	}
	o.fp = fingerprint(o.provider.Name(), o.svc)
	o.adoptable = adoptable(o.svc, o.fp)
	st := o.ensureState()
	step := planEnsure(st, firstSight, o.adoptable, o.fp, o.set)
	if step == ensureCall && firstSight && controllerutil.ContainsFinalizer(o.svc, Finalizer) {
		// Our finalizer says a manager meant to create the load balancer,
		// not that it did: after failovers, a new leader finds many such
		// Services. One shared listing that lacks it lets the provider
		// create without looking it up first.
		o.listedAbsent = c.provisioning.absent(ctx, o.provider, c.opts.ClusterName, o.svc.UID, absentListingAge)
	}
	if step == ensureAskListing {
		// An Ensure of this very configuration answered "provisioning": a
		// shared listing tells whether it is done, without another Ensure
		// per Service.
		l := &o.listing
		l.state, l.status, l.wait = c.provisioning.state(ctx, o.provider, c.opts.ClusterName, o.svc.UID, st.provisioning.due)
		if l.state != lbUnknown {
			logger.V(1).Info("load balancer provisioning; the listing answered", "answer", l.state)
		}
	}
}

// apply carries out the plan of o's Service in order, and feeds the outcomes
// into its state: it is the only place a sync writes to the cloud, the API
// server or the state. The Service it acts on is the one observed, then as
// each write of it returns it. A failed write ends the sync as planFailure
// plans; EnsureLoadBalancer's answer goes on as planEnsureResult plans.
func (c *Controller) apply(ctx context.Context, o *observation, plan []action) (reconcile.Result, error) {
	svc := o.svc
	// absent: the finalizer was just added, so no load balancer exists.
	absent := false
	var res reconcile.Result
	for len(plan) > 0 {
		a := plan[0]
		plan = plan[1:]
		var err error
		switch a.kind {
		case actEvent:
			on := svc
			if a.old {
				on = o.last.svc
			}
			c.recorder.Event(on, a.eventType, a.reason, a.message)
		case actCondition:
			err = c.setCondition(ctx, svc, a.cond)
			if err != nil && a.bestEffort {
				log.FromContext(ctx).Error(err, "set LoadBalancerReady condition")
				err = nil
			}
		case actProvisioning:
			c.cache.update(o.key, func(e *svcState) { e.provisioning = a.wait })
		case actElsewhere:
			c.cache.update(o.key, func(e *svcState) { e.phase = phaseElsewhere })
		case actPublish:
			err = c.publish(ctx, svc, o.provider, a.status, a.cond)
		case actRequeue:
			res.RequeueAfter = a.after
		case actFail:
			return reconcile.Result{}, a.err
		case actRemember:
			c.cache.remember(svc.DeepCopy(), o.provider)
		case actForget:
			c.cache.delete(o.key)
		case actDeleteOld:
			lb, _ := o.last.provider.LoadBalancer()
			err = lb.EnsureLoadBalancerDeleted(cloud.WithPriority(ctx, cloud.PriorityLBWrite), c.opts.ClusterName, o.last.svc)
		case actDeleteLB:
			lb, _ := o.provider.LoadBalancer()
			err = lb.EnsureLoadBalancerDeleted(cloud.WithPriority(ctx, cloud.PriorityLBWrite), c.opts.ClusterName, svc)
			if errors.Is(err, cloudprovider.ImplementedElsewhere) {
				err = nil // not ours to delete
			}
		case actFinalizer:
			svc, err = c.patchService(ctx, svc, false, func(s *v1.Service) {
				if a.add {
					absent = controllerutil.AddFinalizer(s, Finalizer)
				} else {
					controllerutil.RemoveFinalizer(s, Finalizer)
				}
			})
		case actClearStatus:
			_, err = c.patchService(ctx, svc, true, func(s *v1.Service) {
				s.Status.LoadBalancer = v1.LoadBalancerStatus{}
				removeCondition(&s.Status.Conditions, ConditionLoadBalancerReady)
			})
		case actAdopt:
			// The condition says nothing of the backends the load balancer
			// has: they may have changed while no controller ran. The node
			// syncer sends them once (one update, no Ensure).
			c.cache.update(o.key, func(e *svcState) {
				e.nodes, e.unverified, e.phase = a.set, true, phaseEnsured
				e.ensuredFrom(svc)
			})
			log.FromContext(ctx).V(1).Info("load balancer already ensured from this configuration; adopted without a cloud call, its backends are sent by the next backend pass",
				"provider", o.provider.Name())
			c.verifyBackends(ctx, svc)
		case actSent:
			now := c.opts.Clock.Now()
			c.cache.update(o.key, func(e *svcState) {
				e.nodes, e.unverified, e.poolKeys = a.set, false, a.poolKeys
				if e.firstEnsure.IsZero() {
					e.firstEnsure = now
				}
			})
		case actEnsure:
			lb, _ := o.provider.LoadBalancer()
			ectx := cloud.WithPriority(ctx, cloud.PriorityLBWrite)
			if absent || o.listedAbsent {
				ectx = stratus.WithLoadBalancerAbsent(ectx)
			}
			if o.pooled {
				// The backend passes keep the pools' members.
				ectx = stratus.WithBackendPoolsManaged(ectx)
			}
			status, eerr := lb.EnsureLoadBalancer(ectx, c.opts.ClusterName, svc, a.nodes)
			var retryErr *cloudproviderapi.RetryError
			if errors.As(eerr, &retryErr) {
				log.FromContext(ctx).V(1).Info("load balancer provisioning; checking again later", "provider", o.provider.Name(), "after", retryErr.RetryAfter())
			}
			// The Ready condition records the Service as sent: the
			// finalizer's patch may have brought a newer one.
			next := planEnsureResult(c.opts.Clock.Now(), o.key.String(), status, eerr, hasReadyCondition(svc), a.set, a.fp, fingerprint(o.provider.Name(), svc))
			plan = append(next, plan...)
		}
		if err != nil {
			plan = planFailure(a, err)
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
