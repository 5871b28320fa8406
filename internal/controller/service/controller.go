package service

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/events"
)

// Upstream names.
const (
	// Component is the event source component, as upstream.
	Component = "service-controller"
	// Finalizer guards the deletion of a Service's load balancer.
	Finalizer = "service.kubernetes.io/load-balancer-cleanup"
	// Name is the controller's name (workqueue metrics, logs).
	Name = "service"
)

// Controller is the service controller. Add builds and registers it.
type Controller struct {
	client client.Client
	reader client.Reader // uncached, for conflict retries and orphan checks
	// nodes are the Node objects of the manager's cache, which backends reads.
	nodes    *nodeIndex
	clouds   *cloud.Set
	opts     Options
	recorder record.EventRecorder
	cache    *serviceCache
	// retries carries Services back to the service workers (failed backend
	// updates, drift).
	retries chan event.GenericEvent
	// adopted tells the node syncer about load balancers adopted without
	// a cloud call, whose backends it must send.
	adopted chan event.GenericEvent
	// provisioning shares load-balancer listings among Services whose load
	// balancers are provisioning.
	provisioning *provisioningListings
	// locks keeps a Service's sync and its backend updates apart.
	locks keyLocks
	// pass is what the node syncer remembers between backend passes.
	pass passState
	// sets shares equal backend sets among the cached Services.
	sets sharedSets
	// burst holds a backend pass back while node changes keep coming.
	burst nodeBurst
}

// Add registers the service controller with mgr: the service workers, the backend
// node syncer and the periodic drift and orphan checks. started is false (with a
// log line saying why) when no provider in clouds supports load balancers.
func Add(mgr manager.Manager, clouds *cloud.Set, opts Options) (started bool, err error) {
	logger := mgr.GetLogger().WithName(Name)
	opts, err = opts.withDefaults()
	if err != nil {
		return false, err
	}
	if !slices.ContainsFunc(clouds.Providers(), supportsLB) {
		logger.Info("no provider supports load balancers: service controller not started")
		return false, nil
	}
	for _, p := range clouds.Providers() {
		if !supportsLB(p) {
			logger.Info("provider does not support load balancers; its Services are left alone", "provider", p.Name())
		}
	}
	rec, err := events.NewRecorder(mgr, Component)
	if err != nil {
		return false, err
	}
	nodes, err := newNodeIndex(context.Background(), mgr.GetCache())
	if err != nil {
		return false, fmt.Errorf("service controller: %w", err)
	}
	c := &Controller{
		nodes:    nodes,
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		clouds:   clouds,
		opts:     opts,
		recorder: rec,
		cache:    newServiceCache(),
		retries:  make(chan event.GenericEvent),
		adopted:  make(chan event.GenericEvent),

		provisioning: newProvisioningListings(provisioningFreshness, opts.Clock),
	}
	loadBalancerStates.Track(c.loadBalancerEntries, opts.Clock)

	svcCtrl, err := controller.New(Name, mgr, controller.Options{
		Reconciler:              c,
		MaxConcurrentReconciles: opts.Workers,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.RetryBaseDelay, opts.RetryMaxDelay),
	})
	if err != nil {
		return false, fmt.Errorf("service controller: %w", err)
	}
	if err := svcCtrl.Watch(source.Kind(mgr.GetCache(), &v1.Service{},
		&handler.TypedEnqueueRequestForObject[*v1.Service]{}, servicePredicate())); err != nil {
		return false, fmt.Errorf("service controller: watch services: %w", err)
	}
	if err := svcCtrl.Watch(source.Channel(c.retries, &handler.EnqueueRequestForObject{})); err != nil {
		return false, fmt.Errorf("service controller: watch retries: %w", err)
	}
	if err := svcCtrl.Watch(cloud.ChangeSource(clouds, c.recovered)); err != nil {
		return false, fmt.Errorf("service controller: watch provider recoveries: %w", err)
	}

	nodeCtrl, err := controller.New(Name+"-nodes", mgr, controller.Options{
		Reconciler:              nodeSyncer{c},
		MaxConcurrentReconciles: 1,
	})
	if err != nil {
		return false, fmt.Errorf("service controller: %w", err)
	}
	if err := nodeCtrl.Watch(source.Kind(mgr.GetCache(), &v1.Node{}, nodeEvents(opts.NodeUpdateWindow, opts.Clock, &c.burst, c.listedProviderID))); err != nil {
		return false, fmt.Errorf("service controller: watch nodes: %w", err)
	}
	if err := nodeCtrl.Watch(source.Channel(c.adopted, adoptionEvents(opts.NodeUpdateWindow, opts.Clock, &c.burst))); err != nil {
		return false, fmt.Errorf("service controller: watch adoptions: %w", err)
	}
	// A node whose machine turns out to be gone leaves the backends although
	// the Node object did not change.
	if err := nodeCtrl.Watch(cloud.ChangeSource(clouds, func(context.Context, *cloud.Provider, cloud.Change) []reconcile.Request {
		return []reconcile.Request{nodesKey}
	})); err != nil {
		return false, fmt.Errorf("service controller: watch instance changes: %w", err)
	}
	if err := mgr.Add(&periodic{c}); err != nil {
		return false, fmt.Errorf("service controller: %w", err)
	}
	return true, nil
}

// recovered returns the Services to sync at once after a change of p: when p
// answers again after an outage, those whose last sync failed.
func (c *Controller) recovered(_ context.Context, p *cloud.Provider, ch cloud.Change) []reconcile.Request {
	if ch != cloud.Recovered {
		return nil
	}
	keys := c.cache.failedOf(p)
	reqs := make([]reconcile.Request, len(keys))
	for i, k := range keys {
		reqs[i] = reconcile.Request{NamespacedName: k}
	}
	return reqs
}

func supportsLB(p *cloud.Provider) bool {
	_, ok := p.LoadBalancer()
	return ok
}

// retry hands svc to the service workers for a full sync.
func (c *Controller) retry(ctx context.Context, svc *v1.Service) {
	select {
	case c.retries <- event.GenericEvent{Object: svc}:
	case <-ctx.Done():
		log.FromContext(ctx).Info("not retrying service: shutting down", "service", client.ObjectKeyFromObject(svc))
	}
}

// verifyBackends asks the node syncer for a backend pass that sends svc's
// adopted load balancer its backends.
func (c *Controller) verifyBackends(ctx context.Context, svc *v1.Service) {
	select {
	case c.adopted <- event.GenericEvent{Object: svc}:
	case <-ctx.Done():
	}
}

// wantsLB: the Service asks for a load balancer (which provider serves it is
// decided by the Set).
func wantsLB(svc *v1.Service) bool { return svc.Spec.Type == v1.ServiceTypeLoadBalancer }

// needsCleanup: our finalizer is on a Service that is going away or no longer
// asks for a load balancer.
func needsCleanup(svc *v1.Service) bool {
	return hasFinalizer(svc) && (svc.DeletionTimestamp != nil || !wantsLB(svc))
}

func hasFinalizer(svc *v1.Service) bool { return controllerutil.ContainsFinalizer(svc, Finalizer) }

// servicePredicate is upstream's enqueue filter: creations of Services that want a
// load balancer or need cleanup, updates that change what the load balancer is
// made of (needsUpdate) or need cleanup, deletions of Services that wanted one.
func servicePredicate() predicate.TypedPredicate[*v1.Service] {
	return predicate.TypedFuncs[*v1.Service]{
		CreateFunc: func(e event.TypedCreateEvent[*v1.Service]) bool {
			return wantsLB(e.Object) || needsCleanup(e.Object)
		},
		UpdateFunc: func(e event.TypedUpdateEvent[*v1.Service]) bool {
			return needsUpdate(e.ObjectOld, e.ObjectNew) || needsCleanup(e.ObjectNew)
		},
		DeleteFunc: func(e event.TypedDeleteEvent[*v1.Service]) bool {
			return wantsLB(e.Object) || hasFinalizer(e.Object)
		},
		GenericFunc: func(event.TypedGenericEvent[*v1.Service]) bool { return true },
	}
}
