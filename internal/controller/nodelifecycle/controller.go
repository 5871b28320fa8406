package nodelifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/events"
	"github.com/stratus-ccm/stratus/internal/controller/patch"
	"github.com/stratus-ccm/stratus/pkg/stratus/instanceindex"
)

// Upstream names: the event source component and event reasons.
// ReasonNodeDeletionBlocked is ours.
const (
	Component                 = "cloud-node-lifecycle-controller"
	ReasonDeletingNode        = "DeletingNode"
	ReasonDeletingNodeFailed  = "DeletingNodeFailed"
	ReasonNodeDeletionBlocked = "NodeDeletionBlocked"
)

// shutdownTaint is upstream's: no value, NoSchedule.
var shutdownTaint = v1.Taint{Key: cloudproviderapi.TaintNodeShutdown, Effect: v1.TaintEffectNoSchedule}

// taintBackoff is upstream's retry of taint patches on conflict.
var taintBackoff = wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Factor: 1.0, Jitter: 1.0}

// Add registers the cloud node lifecycle controller with mgr, as a runnable that
// runs on the leader only. It returns started=false, after logging why, when no
// provider in clouds supports Instances or InstancesV2, and an error naming the
// option when opts is invalid.
func Add(mgr manager.Manager, clouds *cloud.Set, opts Options) (started bool, err error) {
	logger := mgr.GetLogger().WithName("cloud-node-lifecycle")
	opts, err = opts.withDefaults()
	if err != nil {
		return false, fmt.Errorf("cloud node lifecycle controller: %w", err)
	}
	if !slices.ContainsFunc(clouds.Providers(), (*cloud.Provider).HasInstances) {
		logger.Info("Cloud node lifecycle controller not started: no provider supports Instances or InstancesV2")
		return false, nil
	}
	recorder, err := events.NewRecorder(mgr, Component)
	if err != nil {
		return false, fmt.Errorf("cloud node lifecycle controller: %w", err)
	}
	c := &controller{
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		clouds:   clouds,
		recorder: recorder,
		opts:     opts,
		clock:    opts.Clock,
		state:    newState(opts),
		changed:  make(chan struct{}, 1),
	}
	for _, p := range clouds.Providers() {
		if p.HasInstances() {
			initMetrics(p.Name())
		}
	}
	// A provider whose instances changed (a watch reported it, or a listing
	// made for another controller showed it) gets a pass at once rather than
	// at the next period.
	clouds.Subscribe(func(_ *cloud.Provider, ch cloud.Change) {
		if ch != cloud.InstancesChanged {
			return
		}
		select {
		case c.changed <- struct{}{}:
		default: // a pass is due already
		}
	})
	if err := mgr.Add(c); err != nil {
		return false, fmt.Errorf("cloud node lifecycle controller: %w", err)
	}
	logger.Info("Cloud node lifecycle controller registered", "monitorPeriod", opts.MonitorPeriod,
		"deletionGracePeriod", opts.DeletionGracePeriod, "deletionBudget",
		fmt.Sprintf("%d%% (min %d) per %s", opts.DeletionBudgetPercent, opts.DeletionBudgetMin, opts.DeletionBudgetWindow))
	return true, nil
}

// controller runs the monitor passes. Its state is touched only by the pass
// goroutine.
type controller struct {
	client   client.Client
	reader   client.Reader
	clouds   *cloud.Set
	recorder record.EventRecorder
	opts     Options
	clock    clock.Clock
	state    *state
	// changed asks for a pass before the period ends (a provider's instances
	// changed).
	changed chan struct{}
}

// Start runs a pass at once and then MonitorPeriod after each pass ends, or
// sooner when a provider reports that its instances changed, until ctx is done.
func (c *controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("cloud-node-lifecycle"))
	for {
		c.pass(ctx)
		t := c.clock.NewTimer(c.opts.MonitorPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		case <-c.changed:
			t.Stop()
		}
	}
}

// pass checks every node that a provider owns.
func (c *controller) pass(ctx context.Context) {
	logger := log.FromContext(ctx)
	var nodes v1.NodeList
	// The cache's own objects, not copies: the pass only reads them (writes go
	// through patch.Apply, which copies), and a copy of every Node every
	// monitor period was most of the manager's allocations at thousands of nodes.
	if err := c.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		if ctx.Err() != nil {
			// Stopped before the cache synced: not an error of the pass.
			return
		}
		logger.Error(err, "List nodes")
		return
	}
	byProvider := map[*cloud.Provider][]*v1.Node{}
	present := map[types.UID]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if p := c.clouds.ForNode(n); p != nil && p.HasInstances() {
			byProvider[p] = append(byProvider[p], n)
			present[n.UID] = true
		}
	}
	c.state.forget(present)
	for p, owned := range byProvider {
		c.passProvider(cloud.WithPriority(ctx, cloud.PriorityLifecycle), p, owned)
	}
}

// passProvider observes the nodes p owns (the NotReady ones are checked against
// the cloud), plans what to do with them, and applies the plan.
func (c *controller) passProvider(ctx context.Context, p *cloud.Provider, owned []*v1.Node) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("provider", p.Name()))
	ready, notReady := c.state.readiness(owned)
	if len(notReady) > 0 {
		c.checkInstances(ctx, p, notReady)
	}
	now := c.clock.Now()
	c.apply(ctx, p, now, len(owned), c.state.plan(now, p.Name(), len(owned), ready, notReady))
}

// apply carries out a plan made at now for p's nodes (owned of them).
func (c *controller) apply(ctx context.Context, p *cloud.Provider, now time.Time, owned int, plan []action) {
	logger := log.FromContext(ctx)
	for _, a := range plan {
		n := a.node
		switch a.kind {
		case actUntaint, actTaint:
			add := a.kind == actTaint
			decision := map[bool]string{true: decisionShutdownTainted, false: decisionShutdownCleared}[add]
			if err := c.setShutdownTaint(ctx, n, add); err != nil {
				logger.Error(err, "Set shutdown taint", "node", n.Name, "add", add)
				continue
			}
			decisions.WithLabelValues(p.Name(), decision).Inc()
		case actCheckFailed:
			logger.Error(a.err, "Check instance; node skipped this pass", "node", n.Name)
			decisions.WithLabelValues(p.Name(), decisionCheckFailed).Inc()
		case actBlock:
			c.block(ctx, p, now, owned, a)
		case actDelete:
			if c.deleteNode(ctx, p, n) {
				c.state.deleted(now, p.Name(), n.UID)
			}
		}
	}
}

// checkInstances fills in whether each NotReady node's instance exists and is
// shut down: from one listing when p can list (a failed listing, or an empty one
// while p owns nodes, marks every check blocked), otherwise with per-node calls,
// Workers at a time.
func (c *controller) checkInstances(ctx context.Context, p *cloud.Provider, checks []check) {
	list, ok, err := p.ListInstances(ctx)
	if ok {
		var blocked BlockReason
		switch {
		case err != nil:
			blocked = BlockedListingFailed
		case len(list) == 0: // checks is not empty, so p owns nodes
			blocked = BlockedEmptyListing
		}
		idx := instanceindex.New(list)
		for i := range checks {
			if blocked != "" {
				checks[i].blocked, checks[i].err = blocked, err
				continue
			}
			if inst := idx.Find(checks[i].node); inst != nil {
				checks[i].exists, checks[i].shutdown = true, inst.Shutdown
			}
		}
		return
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.Workers)
	for i := range checks {
		ch := &checks[i]
		g.Go(func() error {
			ch.exists, ch.err = p.InstanceExists(gctx, ch.node)
			if ch.err == nil && ch.exists {
				ch.shutdown, ch.err = p.InstanceShutdown(gctx, ch.node)
			}
			return nil
		})
	}
	_ = g.Wait() // errors are per check
}

// block records that the guard held back the deletion of a.node, and announces
// it by event when the plan says so (the first time for this reason).
func (c *controller) block(ctx context.Context, p *cloud.Provider, now time.Time, owned int, a action) {
	n := a.node
	deletionBlocked.WithLabelValues(p.Name(), string(a.reason)).Inc()
	log.FromContext(ctx).V(2).Info("Node deletion blocked", "node", n.Name, "reason", a.reason, "cause", a.cause)
	if !a.announce {
		return
	}
	var msg string
	switch a.reason {
	case BlockedListingFailed:
		msg = fmt.Sprintf("Not deleting or tainting node %s: the instance listing of provider %s failed: %v", n.Name, p.Name(), a.cause)
	case BlockedEmptyListing:
		msg = fmt.Sprintf("Not deleting node %s: provider %s returned an empty instance listing while it owns nodes (an outage or credentials problem?)", n.Name, p.Name())
	case BlockedGracePeriod:
		msg = fmt.Sprintf("Node %s does not exist in the cloud provider but has been NotReady only since %s; it is deleted when it stays NotReady for longer than %s",
			n.Name, a.since.UTC().Format(time.RFC3339), c.opts.DeletionGracePeriod)
	case BlockedUnconfirmed:
		msg = fmt.Sprintf("Node %s does not exist in the cloud provider according to one check; waiting for a second check to confirm", n.Name)
	case BlockedBudget:
		b := c.state.budget(p.Name())
		used := b.used(now)
		msg = fmt.Sprintf("Node %s does not exist in the cloud provider, but the deletion budget of provider %s is used up (%d of %d deletions per %s); it is retried later",
			n.Name, p.Name(), used, b.limit(owned+used), b.window)
	}
	// Waiting out the grace period and the confirmation is what every
	// ordinary node removal goes through: progress, not a problem. A failed
	// or empty listing and a used-up budget need a person.
	eventType := v1.EventTypeWarning
	if a.reason == BlockedGracePeriod || a.reason == BlockedUnconfirmed {
		eventType = v1.EventTypeNormal
	}
	c.recorder.Event(n, eventType, ReasonNodeDeletionBlocked, msg)
}

// deleteNode deletes node, on condition that it is still the object the decision
// was made on (same UID and resourceVersion: a node that turned Ready meanwhile
// is not deleted). It reports whether the node was deleted.
func (c *controller) deleteNode(ctx context.Context, p *cloud.Provider, node *v1.Node) bool {
	logger := log.FromContext(ctx).WithValues("node", node.Name)
	c.recorder.Eventf(node, v1.EventTypeNormal, ReasonDeletingNode,
		"Deleting node %s because it does not exist in the cloud provider", node.Name)
	uid, rv := node.UID, node.ResourceVersion
	err := c.client.Delete(ctx, node.DeepCopy(), client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
		logger.Info("Deleted node: its instance does not exist in the cloud provider")
		decisions.WithLabelValues(p.Name(), decisionDeleted).Inc()
		return true
	case apierrors.IsNotFound(err):
		return false
	case apierrors.IsConflict(err):
		logger.Info("Node changed since it was checked; deciding again next pass")
		return false
	default:
		logger.Error(err, "Delete node")
		decisions.WithLabelValues(p.Name(), decisionDeleteFailed).Inc()
		c.recorder.Eventf(node, v1.EventTypeWarning, ReasonDeletingNodeFailed, "Failed deleting node %s: %v", node.Name, err)
		return false
	}
}

// setShutdownTaint adds (or removes) the shutdown taint, keeping every other
// taint, with a patch conditional on the taint list it was computed from, retried
// from a fresh read when that list changed meanwhile.
func (c *controller) setShutdownTaint(ctx context.Context, node *v1.Node, add bool) error {
	_, err := patch.Apply(ctx, c.client, c.reader, node, patch.Options{Kind: patch.Tested, Backoff: &taintBackoff}, func(n *v1.Node) {
		taints := slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == shutdownTaint.Key })
		if add {
			taints = append(taints, shutdownTaint)
		}
		n.Spec.Taints = taints
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set shutdown taint of node %s to %v: %w", node.Name, add, err)
	}
	return nil
}

func hasTaint(node *v1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}
