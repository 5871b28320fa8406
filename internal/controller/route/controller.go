package route

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/events"
	"github.com/stratus-ccm/stratus/internal/controller/patch"
)

// Upstream names: the controller's event source component, its event reason and
// the reasons it writes into NetworkUnavailable.
const (
	Component                 = "route_controller"
	ReasonFailedToCreateRoute = "FailedToCreateRoute"
	ReasonRouteCreated        = "RouteCreated"
	ReasonNoRouteCreated      = "NoRouteCreated"
)

// The queue keys. Each runs a full reconcile; they name the trigger in the
// route_controller_route_sync_total metric, as upstream's keys do (upstream
// has the first two; recovered is stratus's: the routes provider answered
// again after an outage while the last reconcile had failed).
const (
	triggerNodeChange = "node_change"
	triggerPeriodic   = "periodic"
	triggerRecovered  = "recovered"
)

var (
	nodeChangeRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: triggerNodeChange}}
	periodicRequest   = reconcile.Request{NamespacedName: types.NamespacedName{Name: triggerPeriodic}}
	recoveredRequest  = reconcile.Request{NamespacedName: types.NamespacedName{Name: triggerRecovered}}
)

// Add registers the route controller with mgr. It returns started=false, after
// logging why, when the set has no routes provider or the provider does not
// support routes, and an error wrapping ErrNoClusterCIDR when it does but
// opts.ClusterCIDRs is empty. Invalid options are an error naming the option. The
// manager does not call Add at all when --configure-cloud-routes=false.
func Add(mgr manager.Manager, clouds *cloud.Set, opts Options) (started bool, err error) {
	logger := mgr.GetLogger().WithName("route")
	opts, err = opts.withDefaults()
	if err != nil {
		return false, fmt.Errorf("route controller: %w", err)
	}
	provider := clouds.RoutesProvider()
	if provider == nil {
		logger.Info("Route controller not started: no provider is configured for routes")
		return false, nil
	}
	routes, ok := provider.Routes()
	if !ok {
		logger.Info("Route controller not started: the routes provider does not support routes", "provider", provider.Name())
		return false, nil
	}
	if len(opts.ClusterCIDRs) == 0 {
		return false, fmt.Errorf("route controller, provider %s: %w", provider.Name(), ErrNoClusterCIDR)
	}
	recorder, err := events.NewRecorder(mgr, Component)
	if err != nil {
		return false, fmt.Errorf("route controller: %w", err)
	}
	r := &reconciler{
		client:   mgr.GetClient(),
		clouds:   clouds,
		provider: provider,
		routes:   routes,
		recorder: recorder,
		opts:     opts,
		backoff:  workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.ReconciliationPeriod, opts.MaxRetryBackoff),
	}
	// One token per period, burst one, and no event waits longer than a period:
	// a stream of node changes becomes one reconcile per period (KEP-5237).
	limiter := workqueue.NewTypedWithMaxWaitRateLimiter[reconcile.Request](
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Every(opts.ReconciliationPeriod), 1)},
		opts.ReconciliationPeriod)
	c, err := controller.New("route", mgr, controller.Options{
		Reconciler: r,
		// Every reconcile is cluster-wide; the reconciler's bookkeeping relies
		// on a single worker.
		MaxConcurrentReconciles: 1,
		RateLimiter:             limiter,
		UsePriorityQueue:        ptr.To(false),
	})
	if err != nil {
		return false, fmt.Errorf("route controller: %w", err)
	}
	if err := c.Watch(source.Kind(mgr.GetCache(), &v1.Node{}, r.nodeHandler())); err != nil {
		return false, fmt.Errorf("route controller: watch nodes: %w", err)
	}
	// A reconcile that failed is run again as soon as the routes provider
	// answers after an outage, not when its backoff (up to MaxRetryBackoff)
	// ends: the routes it could not create are the pod network of new nodes.
	if err := c.Watch(cloud.ChangeSource(clouds, r.recovered)); err != nil {
		return false, fmt.Errorf("route controller: watch provider recoveries: %w", err)
	}
	// The periodic reconcile starts with the controller and keeps itself queued.
	if err := c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(periodicRequest)
		return nil
	})); err != nil {
		return false, fmt.Errorf("route controller: periodic source: %w", err)
	}
	logger.Info("Route controller registered", "provider", provider.Name(), "clusterName", opts.ClusterName,
		"clusterCIDRs", opts.ClusterCIDRs, "reconciliationPeriod", opts.ReconciliationPeriod)
	return true, nil
}

// reconciler runs cluster-wide route reconciles.
type reconciler struct {
	client   client.Client
	clouds   *cloud.Set
	provider *cloud.Provider
	routes   cloudprovider.Routes
	recorder record.EventRecorder
	opts     Options
	// backoff computes the delay after consecutive failed reconciles.
	backoff workqueue.TypedRateLimiter[string]

	// changes counts the node changes the event handler saw.
	changes atomic.Uint64

	// Only the controller's single worker touches these.
	lastStart   time.Time
	lastSuccess time.Time
	// failing is true while the last reconcile failed: a recovery of the
	// provider then runs one at once.
	failing bool
	// covered is the value of changes when the last successful reconcile started:
	// those changes are in the routes.
	covered uint64
}

// recovered asks for a reconcile when the routes provider answers again after
// an outage; Reconcile runs it only if the last reconcile failed. The pending
// retry of that reconcile then finds the routes done (a node change already
// covered, or a periodic reconcile within the resync period) and calls nothing.
func (r *reconciler) recovered(_ context.Context, p *cloud.Provider, ch cloud.Change) []reconcile.Request {
	if ch != cloud.Recovered || p != r.provider {
		return nil
	}
	return []reconcile.Request{recoveredRequest}
}

// backoffKey is the backoff's one item: every reconcile is cluster-wide.
const backoffKey = "routes"

// Reconcile runs a full reconcile unless one ran too recently, or, for the
// periodic trigger, unless a reconcile succeeded within the resync period, or,
// for a node change, unless a successful reconcile already saw the change.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	trigger := req.Name
	if trigger == triggerRecovered && !r.failing {
		return reconcile.Result{}, nil // nothing failed: the routes are as the last reconcile left them
	}
	changes := r.changes.Load()
	if !r.lastSuccess.IsZero() {
		switch trigger {
		case triggerNodeChange:
			if changes == r.covered {
				return reconcile.Result{}, nil
			}
		case triggerPeriodic:
			if wait := time.Until(r.lastSuccess.Add(r.opts.ResyncPeriod)); wait > 0 {
				return reconcile.Result{RequeueAfter: wait}, nil
			}
		}
	}
	if wait := time.Until(r.lastStart.Add(r.opts.ReconciliationPeriod)); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}

	r.lastStart = time.Now()
	changed, err := r.sync(ctx)
	recordSync(trigger, changed, err)
	r.failing = err != nil
	if err != nil {
		delay := r.backoff.When(backoffKey)
		log.FromContext(ctx).Error(err, "Route reconcile failed", "trigger", trigger, "retryAfter", delay)
		return reconcile.Result{RequeueAfter: delay}, nil
	}
	r.backoff.Forget(backoffKey)
	r.lastSuccess, r.covered = time.Now(), changes
	if trigger == triggerPeriodic {
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
	}
	return reconcile.Result{}, nil
}

// sync lists routes and nodes, deletes and creates routes, and writes the nodes'
// NetworkUnavailable conditions. changed is true when a route was created or
// deleted. Failed cloud operations and condition writes do not stop the others;
// they are returned together so that the reconcile is retried.
func (r *reconciler) sync(ctx context.Context) (changed bool, err error) {
	logger := log.FromContext(ctx)
	cloudCtx := cloud.WithPriority(ctx, cloud.PriorityRoutes)
	routes, err := r.routes.ListRoutes(cloudCtx, r.opts.ClusterName)
	if err != nil {
		return false, fmt.Errorf("list routes of cluster %s from provider %s: %w", r.opts.ClusterName, r.provider.Name(), err)
	}
	var nodes v1.NodeList
	// The cache's own objects, not copies: the plan only reads them, and
	// setNetworkUnavailable writes through patch.Apply, which copies.
	if err := r.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("list nodes: %w", err)
	}
	in := input{foreign: sets.New[string](), routes: routes, clusterCIDRs: r.opts.ClusterCIDRs}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if r.clouds.ForNode(n) == r.provider {
			in.nodes = append(in.nodes, n)
		} else {
			in.foreign.Insert(n.Name)
		}
	}
	p := computePlan(in)
	for _, rt := range p.unparsable {
		logger.Error(nil, "Ignoring route with unparsable destination", "route", rt.Name, "destination", rt.DestinationCIDR)
	}

	// Deletes finish before creates start, so that a replaced route, or a CIDR
	// that moved to another node, never exists twice in the cloud.
	deleteErrs := forEach(p.deletes, r.opts.MaxConcurrentOps, func(rt *cloudprovider.Route) error {
		return r.deleteRoute(cloudCtx, rt)
	})
	createErrs := forEach(p.creates, r.opts.MaxConcurrentOps, func(c creation) error {
		return r.createRoute(cloudCtx, c)
	})
	for i, c := range p.creates {
		if createErrs[i] == nil {
			p.nodes[c.node.Name][c.route.DestinationCIDR] = actionKeep
		}
	}
	changed = countNil(deleteErrs) > 0 || countNil(createErrs) > 0

	var targets []*v1.Node
	for _, n := range in.nodes {
		if _, ok := p.nodes[n.Name]; ok {
			targets = append(targets, n)
		}
	}
	condErrs := forEach(targets, r.opts.MaxConcurrentOps, func(n *v1.Node) error {
		return r.setNetworkUnavailable(ctx, n, networkUnavailable(p.nodes[n.Name]))
	})
	return changed, errors.Join(
		summarize("route deletions", deleteErrs),
		summarize("route creations", createErrs),
		summarize("NetworkUnavailable writes", condErrs))
}

// summarize turns the results of many operations into one error that stays short
// at thousands of nodes: how many failed, and the first failure. Each failure is
// logged where it happens.
func summarize(what string, errs []error) error {
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d %s failed, first: %w", failed, len(errs), what, first)
}

func (r *reconciler) deleteRoute(ctx context.Context, rt *cloudprovider.Route) error {
	logger := log.FromContext(ctx).WithValues("route", rt.Name, "destination", rt.DestinationCIDR, "node", rt.TargetNode)
	start := time.Now()
	if err := r.routes.DeleteRoute(ctx, r.opts.ClusterName, rt); err != nil {
		logger.Error(err, "Could not delete route", "after", time.Since(start))
		return fmt.Errorf("delete route %s %s of node %q: %w", rt.Name, rt.DestinationCIDR, rt.TargetNode, err)
	}
	logger.Info("Deleted route", "blackhole", rt.Blackhole, "after", time.Since(start))
	return nil
}

func (r *reconciler) createRoute(ctx context.Context, c creation) error {
	start := time.Now()
	if err := r.routes.CreateRoute(ctx, r.opts.ClusterName, c.nameHint, c.route); err != nil {
		msg := fmt.Sprintf("Could not create route %s %s for node %s after %v: %v",
			c.nameHint, c.route.DestinationCIDR, c.node.Name, time.Since(start), err)
		r.recorder.Event(&v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: c.node.Name, UID: c.node.UID},
			v1.EventTypeWarning, ReasonFailedToCreateRoute, msg)
		log.FromContext(ctx).Error(err, "Could not create route", "node", c.node.Name,
			"destination", c.route.DestinationCIDR, "nameHint", c.nameHint, "after", time.Since(start))
		return fmt.Errorf("create route %s for node %s: %w", c.route.DestinationCIDR, c.node.Name, err)
	}
	log.FromContext(ctx).Info("Created route", "node", c.node.Name, "destination", c.route.DestinationCIDR,
		"nameHint", c.nameHint, "after", time.Since(start))
	return nil
}

// setNetworkUnavailable writes node's NetworkUnavailable condition unless it
// already has the wanted status with this controller's reason (a condition
// another component wrote, e.g. a CNI, is overwritten). It patches only that
// condition of the status, so kubelet's conditions are never clobbered.
func (r *reconciler) setNetworkUnavailable(ctx context.Context, node *v1.Node, unavailable bool) error {
	want := v1.NodeCondition{
		Type:    v1.NodeNetworkUnavailable,
		Status:  v1.ConditionFalse,
		Reason:  ReasonRouteCreated,
		Message: "RouteController created a route",
	}
	if unavailable {
		want.Status, want.Reason, want.Message = v1.ConditionTrue, ReasonNoRouteCreated, "RouteController failed to create a route"
	}
	now := metav1.Now()
	want.LastHeartbeatTime, want.LastTransitionTime = now, now
	for _, c := range node.Status.Conditions {
		if c.Type != v1.NodeNetworkUnavailable {
			continue
		}
		if c.Status == want.Status {
			if c.Reason == want.Reason {
				return nil
			}
			// Only the reason changes: the status did not transition.
			want.LastTransitionTime = c.LastTransitionTime
		}
	}
	// A strategic merge patch merges conditions by type and carries no
	// resourceVersion: it cannot conflict with kubelet's status updates, and
	// the reader is never asked.
	_, err := patch.Apply(ctx, r.client, nil, node, patch.Options{Kind: patch.Strategic, Status: true}, func(n *v1.Node) {
		i := slices.IndexFunc(n.Status.Conditions, func(c v1.NodeCondition) bool { return c.Type == v1.NodeNetworkUnavailable })
		if i < 0 {
			n.Status.Conditions = append(n.Status.Conditions, want)
			return
		}
		n.Status.Conditions[i] = want
	})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; its routes go in the next reconcile
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "Could not set NetworkUnavailable", "node", node.Name, "status", want.Status)
		return fmt.Errorf("set NetworkUnavailable=%s on node %s: %w", want.Status, node.Name, err)
	}
	log.FromContext(ctx).Info("Set NetworkUnavailable", "node", node.Name, "status", want.Status, "reason", want.Reason)
	return nil
}

// nodeHandler enqueues a rate-limited node_change reconcile on every change that
// can affect routes.
func (r *reconciler) nodeHandler() handler.TypedEventHandler[*v1.Node, reconcile.Request] {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		r.changes.Add(1)
		q.AddRateLimited(nodeChangeRequest)
	}
	return handler.TypedFuncs[*v1.Node, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if routesAffected(e.ObjectOld, e.ObjectNew) {
				enqueue(q)
			}
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q)
		},
	}
}

// routesAffected reports whether a node update can change the routes: its pod
// CIDRs or addresses changed (upstream's triggers), or what decides which
// provider owns it (provider ID, labels). Informer resyncs (identical objects)
// do not count: the periodic reconcile covers drift.
func routesAffected(old, updated *v1.Node) bool {
	return !reflect.DeepEqual(old.Spec.PodCIDRs, updated.Spec.PodCIDRs) ||
		!reflect.DeepEqual(old.Status.Addresses, updated.Status.Addresses) ||
		old.Spec.ProviderID != updated.Spec.ProviderID ||
		!reflect.DeepEqual(old.Labels, updated.Labels)
}

// forEach calls f for every item, at most limit at a time, and returns f's
// results in the order of items.
func forEach[T any](items []T, limit int, f func(T) error) []error {
	errs := make([]error, len(items))
	var g errgroup.Group
	g.SetLimit(limit)
	for i, item := range items {
		g.Go(func() error {
			errs[i] = f(item)
			return nil
		})
	}
	_ = g.Wait() // the functions report through errs
	return errs
}

func countNil(errs []error) int {
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	return n
}
