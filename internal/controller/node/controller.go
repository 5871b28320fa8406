package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/events"
	"github.com/stratus-ccm/stratus/internal/controller/patch"
)

// Upstream names: the event source component and the event reasons. Upstream has
// no event for a failed initialization; ReasonInitializationFailed is ours.
const (
	Component                  = "cloud-node-controller"
	ReasonSynced               = "Synced"
	ReasonInitializationFailed = "InitializationFailed"
)

// ErrNoProviderID is wrapped by the initialization error of a node whose provider
// (through InstancesV2) reported no provider ID while the node has none: untainting
// it would leave a node that the lifecycle and service controllers cannot match.
var ErrNoProviderID = errors.New("cloud provider does not set node provider ID")

// conflictBackoff is upstream's retry of node updates on conflict.
var conflictBackoff = wait.Backoff{Steps: 20, Duration: 50 * time.Millisecond, Factor: 1.0, Jitter: 1.0}

// Add registers the cloud node controller (initialization and label repair,
// --concurrent-node-syncs workers) and its periodic address refresh with mgr. It
// returns started=false, after logging why, when no provider in clouds supports
// Instances or InstancesV2, and an error naming the option when opts is invalid.
func Add(mgr manager.Manager, clouds *cloud.Set, opts Options) (started bool, err error) {
	logger := mgr.GetLogger().WithName("cloud-node")
	opts, err = opts.withDefaults()
	if err != nil {
		return false, fmt.Errorf("cloud node controller: %w", err)
	}
	if !slices.ContainsFunc(clouds.Providers(), (*cloud.Provider).HasInstances) {
		logger.Info("Cloud node controller not started: no provider supports Instances or InstancesV2")
		return false, nil
	}
	recorder, err := events.NewRecorder(mgr, Component)
	if err != nil {
		return false, fmt.Errorf("cloud node controller: %w", err)
	}
	r := &reconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), clouds: clouds, recorder: recorder}
	nodeStates.Track(r.nodeEntries, clock.RealClock{})
	c, err := controller.New("cloud-node", mgr, controller.Options{
		Reconciler:              r,
		MaxConcurrentReconciles: opts.Workers,
		RateLimiter:             rateLimiter(opts),
	})
	if err != nil {
		return false, fmt.Errorf("cloud node controller: %w", err)
	}
	if err := c.Watch(source.Kind(mgr.GetCache(), &v1.Node{}, &handler.TypedEnqueueRequestForObject[*v1.Node]{}, relevantChange())); err != nil {
		return false, fmt.Errorf("cloud node controller: watch nodes: %w", err)
	}
	// Nodes whose initialization failed during a provider's outage are
	// retried when it answers again, not when their backoff ends.
	if err := c.Watch(cloud.ChangeSource(clouds, r.recovered)); err != nil {
		return false, fmt.Errorf("cloud node controller: watch provider recoveries: %w", err)
	}
	ref := &refresher{client: mgr.GetClient(), clouds: clouds, opts: opts}
	if err := mgr.Add(ref); err != nil {
		return false, fmt.Errorf("cloud node controller: address refresh: %w", err)
	}
	logger.Info("Cloud node controller registered", "workers", opts.Workers,
		"statusUpdateWorkers", opts.StatusUpdateWorkers, "statusUpdateFrequency", opts.StatusUpdateFrequency)
	return true, nil
}

// rateLimiter is the per-Node backoff of failed syncs (RetryBaseDelay doubling
// to RetryMaxDelay) combined with the work queue's default overall bucket (10
// qps, burst 100), so a burst of failing nodes cannot flood the cloud either.
func rateLimiter(opts Options) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.RetryBaseDelay, opts.RetryMaxDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// relevantChange lets through creations and the updates that can change what a
// sync does: taints, labels, provider ID and the provided-node-ip annotation.
// Upstream queues every update, so each kubelet status write re-runs a failing
// initialization (and its cloud calls) regardless of the backoff.
func relevantChange() predicate.TypedPredicate[*v1.Node] {
	return predicate.TypedFuncs[*v1.Node]{
		UpdateFunc: func(e event.TypedUpdateEvent[*v1.Node]) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return !slices.Equal(o.Spec.Taints, n.Spec.Taints) ||
				!maps.Equal(o.Labels, n.Labels) ||
				o.Spec.ProviderID != n.Spec.ProviderID ||
				o.Annotations[ProvidedNodeIPAnnotation] != n.Annotations[ProvidedNodeIPAnnotation]
		},
		DeleteFunc: func(event.TypedDeleteEvent[*v1.Node]) bool { return false },
	}
}

// reconciler initializes tainted nodes and repairs the labels of initialized ones.
type reconciler struct {
	client   client.Client
	reader   client.Reader // the API server, for re-reads after a conflict
	clouds   *cloud.Set
	recorder record.EventRecorder
}

// recovered returns the nodes to sync at once after a change of p: when p
// answers again after an outage, the uninitialized nodes it owns.
func (r *reconciler) recovered(ctx context.Context, p *cloud.Provider, ch cloud.Change) []reconcile.Request {
	if ch != cloud.Recovered {
		return nil
	}
	var nodes v1.NodeList
	// Read only: the cache's own objects, not copies.
	if err := r.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "List nodes to retry after the provider recovered", "provider", p.Name())
		return nil
	}
	var reqs []reconcile.Request
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) && r.clouds.ForNode(n) == p {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
		}
	}
	return reqs
}

// Reconcile syncs one node: initialization when it carries the uninitialized
// taint, otherwise beta/GA label repair (no cloud call). Nodes no provider owns are
// left alone.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &v1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	p := r.clouds.ForNode(node)
	if p == nil || !p.HasInstances() {
		return reconcile.Result{}, nil
	}
	if !hasTaint(node, cloudproviderapi.TaintExternalCloudProvider) {
		return reconcile.Result{}, r.repairLabels(ctx, node)
	}
	return reconcile.Result{}, r.initialize(ctx, p, node)
}

// repairLabels writes the label changes repairLabels computes, as a label-only
// merge patch.
func (r *reconciler) repairLabels(ctx context.Context, node *v1.Node) error {
	changes := repairLabels(node.Labels)
	if len(changes) == 0 {
		return nil
	}
	_, err := patch.Apply(ctx, r.client, r.reader, node, patch.Options{Kind: patch.Merge}, func(n *v1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, changes)
	})
	if err != nil {
		return fmt.Errorf("repair beta/GA labels of node %s: %w", node.Name, err)
	}
	log.FromContext(ctx).V(2).Info("Repaired beta/GA labels", "labels", changes)
	return nil
}

// initialize fetches the node's metadata once and writes it: addresses first (so
// that the node has its IPs when it becomes schedulable), then provider ID, labels
// and the removal of the uninitialized taint in one patch, with every other taint
// kept. Failures leave the taint, emit a Warning event and return the error, so
// that the node is retried with backoff.
func (r *reconciler) initialize(ctx context.Context, p *cloud.Provider, node *v1.Node) error {
	logger := log.FromContext(ctx).WithValues("provider", p.Name())
	logger.Info("Initializing node")
	md, err := p.InstanceMetadata(cloud.WithPriority(ctx, cloud.PriorityNodeInit), node)
	if err != nil {
		// The cloud layer's error names the provider, the call and the node.
		return r.failed(node, p, "metadata", err)
	}
	if md == nil {
		// Upstream: no metadata yet; the node stays tainted until its next change.
		logger.Info("Provider returned no instance metadata; node stays uninitialized")
		return nil
	}
	if _, v2 := p.InstancesV2(); v2 && md.ProviderID == "" && node.Spec.ProviderID == "" {
		return r.failed(node, p, "provider_id", fmt.Errorf("initialize node %s: %w (provider %s)", node.Name, ErrNoProviderID, p.Name()))
	}
	addrs, changed, err := DesiredAddresses(node, md.NodeAddresses)
	if err != nil {
		return r.failed(node, p, "provided_node_ip", fmt.Errorf("initialize node %s: %w", node.Name, err))
	}
	if changed {
		patched, err := patchAddresses(ctx, r.client, node, addrs)
		if err != nil {
			return r.failed(node, p, "write", err)
		}
		addressUpdates.WithLabelValues(p.Name(), "init").Inc()
		// The address patch made the cached node's version stale: the
		// conditional patch below starts from the answer, or it would get a
		// conflict and a re-read for every node.
		node = patched
	}

	// The taint list is replaced whole, so the patch is conditional on the
	// list it was computed from (Tested), not on the whole version: the
	// kubelet's first status update of a joining node would make that a
	// conflict and a re-read.
	_, err = patch.Apply(ctx, r.client, r.reader, node, patch.Options{Kind: patch.Tested, Backoff: &conflictBackoff}, func(n *v1.Node) {
		if !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) {
			return
		}
		labels, skipped := metadataLabels(n.Labels, md)
		for _, s := range skipped {
			logger.Info("Skipping additional label from the provider", "key", s.key, "value", s.value, "reason", s.reason)
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, labels)
		n.Spec.Taints = withoutTaint(n.Spec.Taints, cloudproviderapi.TaintExternalCloudProvider)
		if n.Spec.ProviderID == "" && md.ProviderID != "" {
			n.Spec.ProviderID = md.ProviderID
		}
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return r.failed(node, p, "write", fmt.Errorf("remove the uninitialized taint of node %s: %w", node.Name, err))
	}
	taintRemovalDelay.Observe(time.Since(node.CreationTimestamp.Time).Seconds())
	logger.Info("Successfully initialized node")
	r.recorder.Event(node, v1.EventTypeNormal, ReasonSynced, "Node synced successfully")
	initialSyncDelay.Observe(time.Since(node.CreationTimestamp.Time).Seconds())
	return nil
}

// failed reports a failed initialization and returns err for the backoff.
func (r *reconciler) failed(node *v1.Node, p *cloud.Provider, cause string, err error) error {
	initFailures.WithLabelValues(p.Name(), cause).Inc()
	r.recorder.Eventf(node, v1.EventTypeWarning, ReasonInitializationFailed,
		"Node stays tainted with %s and is retried: %v", cloudproviderapi.TaintExternalCloudProvider, err)
	return err
}

// patchAddresses replaces the node's status.addresses with addrs (a JSON merge
// patch replaces lists whole, so no stale entry of the same type survives).
func patchAddresses(ctx context.Context, c client.Client, node *v1.Node, addrs []v1.NodeAddress) (*v1.Node, error) {
	// A merge patch does not conflict: the reader is never asked.
	patched, err := patch.Apply(ctx, c, nil, node, patch.Options{Kind: patch.Merge, Status: true}, func(n *v1.Node) {
		n.Status.Addresses = addrs
	})
	if err != nil {
		return nil, fmt.Errorf("update addresses of node %s: %w", node.Name, err)
	}
	return patched, nil
}

func hasTaint(node *v1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

// withoutTaint returns taints without any taint with key (any effect), never nil
// so that the patch writes an empty list rather than deleting nothing.
func withoutTaint(taints []v1.Taint, key string) []v1.Taint {
	out := make([]v1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}
