package nodelifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/cloud/instanceindex"
	"github.com/stratus-ccm/stratus/internal/controller/events"
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
		now:      time.Now,
		strikes:  map[types.UID]*strikes{},
		clocks:   notReadyClocks{},
		reported: map[types.UID]map[BlockReason]bool{},
		budgets:  map[*cloud.Provider]*deletionBudget{},
		changed:  make(chan struct{}, 1),
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

// controller runs the monitor passes. Its maps are touched only by the pass
// goroutine.
type controller struct {
	client   client.Client
	reader   client.Reader
	clouds   *cloud.Set
	recorder record.EventRecorder
	opts     Options
	now      func() time.Time

	// strikes counts, per node UID, the checks in a row that said "does not exist".
	strikes map[types.UID]*strikes
	// clocks says since when each NotReady node has been NotReady.
	clocks notReadyClocks
	// reported holds the block reasons announced by event for a node since it
	// was last Ready or seen to exist, so that a guard holding a node back for
	// many passes, for whichever reasons in turn, emits one event per reason.
	reported map[types.UID]map[BlockReason]bool
	budgets  map[*cloud.Provider]*deletionBudget
	// changed asks for a pass before the period ends (a provider's instances
	// changed).
	changed chan struct{}
}

// Start runs a pass at once and then MonitorPeriod after each pass ends, or
// sooner when a provider reports that its instances changed, until ctx is done.
func (c *controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("cloud-node-lifecycle"))
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.changed:
			t.Stop()
		}
		c.pass(ctx)
		t.Reset(c.opts.MonitorPeriod)
	}
}

// check is what one pass learned about a NotReady node.
type check struct {
	node     *v1.Node
	since    time.Time // NotReady since
	exists   bool
	shutdown bool
	err      error
	blocked  BlockReason // set when the provider could not be asked at all
	owned    int         // nodes the provider owns, for the budget
}

// pass checks every node that a provider owns.
func (c *controller) pass(ctx context.Context) {
	logger := log.FromContext(ctx)
	var nodes v1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
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
	for uid := range c.strikes {
		if !present[uid] {
			delete(c.strikes, uid)
		}
	}
	for uid := range c.reported {
		if !present[uid] {
			delete(c.reported, uid)
		}
	}
	for uid := range c.clocks {
		if !present[uid] {
			delete(c.clocks, uid)
		}
	}
	for p, owned := range byProvider {
		c.passProvider(cloud.WithPriority(ctx, cloud.PriorityLifecycle), p, owned)
	}
}

// passProvider handles the nodes p owns: Ready ones lose the shutdown taint,
// NotReady ones are checked against the cloud, then tainted or deleted.
func (c *controller) passProvider(ctx context.Context, p *cloud.Provider, owned []*v1.Node) {
	logger := log.FromContext(ctx).WithValues("provider", p.Name())
	ctx = log.IntoContext(ctx, logger)
	var notReady []check
	for _, n := range owned {
		ready, since := c.clocks.observe(n)
		if !ready {
			notReady = append(notReady, check{node: n, since: since, owned: len(owned)})
			continue
		}
		delete(c.strikes, n.UID)
		delete(c.reported, n.UID)
		if hasTaint(n, shutdownTaint.Key) {
			if err := c.setShutdownTaint(ctx, n, false); err != nil {
				logger.Error(err, "Remove shutdown taint", "node", n.Name)
			} else {
				decisions.WithLabelValues(p.Name(), decisionShutdownCleared).Inc()
			}
		}
	}
	if len(notReady) == 0 {
		return
	}
	c.checkInstances(ctx, p, notReady)

	now := c.now()
	var candidates []check
	for _, ch := range notReady {
		n := ch.node
		switch {
		case ch.blocked != "":
			c.block(ctx, p, ch, ch.blocked, ch.err)
		case ch.err != nil:
			logger.Error(ch.err, "Check instance; node skipped this pass", "node", n.Name)
			decisions.WithLabelValues(p.Name(), decisionCheckFailed).Inc()
		case ch.exists:
			delete(c.strikes, n.UID)
			delete(c.reported, n.UID)
			if ch.shutdown && !hasTaint(n, shutdownTaint.Key) {
				if err := c.setShutdownTaint(ctx, n, true); err != nil {
					logger.Error(err, "Add shutdown taint", "node", n.Name)
				} else {
					decisions.WithLabelValues(p.Name(), decisionShutdownTainted).Inc()
				}
			}
		default:
			st, ok := c.strikes[n.UID]
			if !ok {
				st = &strikes{}
				c.strikes[n.UID] = st
			}
			st.observe(now, c.opts.ConfirmationInterval)
			if reason := checkGuard(now, ch.since, c.opts.DeletionGracePeriod, st.count); reason != "" {
				c.block(ctx, p, ch, reason, nil)
				continue
			}
			candidates = append(candidates, ch)
		}
	}
	// The budget goes to the nodes NotReady the longest.
	slices.SortStableFunc(candidates, func(a, b check) int { return a.since.Compare(b.since) })
	budget := c.budget(p)
	for _, ch := range candidates {
		if !budget.allow(now, len(owned)) {
			c.block(ctx, p, ch, BlockedBudget, nil)
			continue
		}
		if c.deleteNode(ctx, p, ch.node) {
			budget.record(now)
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
			if ch.err != nil {
				ch.err = fmt.Errorf("check instance of node %s with provider %s: %w", ch.node.Name, p.Name(), ch.err)
			}
			return nil
		})
	}
	_ = g.Wait() // errors are per check
}

// block records that the guard held back the deletion of ch.node, and announces
// it by event unless this reason was announced for the node already.
func (c *controller) block(ctx context.Context, p *cloud.Provider, ch check, reason BlockReason, cause error) {
	n := ch.node
	deletionBlocked.WithLabelValues(p.Name(), string(reason)).Inc()
	log.FromContext(ctx).V(2).Info("Node deletion blocked", "node", n.Name, "reason", reason, "cause", cause)
	if c.reported[n.UID][reason] {
		return
	}
	if c.reported[n.UID] == nil {
		c.reported[n.UID] = map[BlockReason]bool{}
	}
	c.reported[n.UID][reason] = true
	var msg string
	switch reason {
	case BlockedListingFailed:
		msg = fmt.Sprintf("Not deleting or tainting node %s: the instance listing of provider %s failed: %v", n.Name, p.Name(), cause)
	case BlockedEmptyListing:
		msg = fmt.Sprintf("Not deleting node %s: provider %s returned an empty instance listing while it owns nodes (an outage or credentials problem?)", n.Name, p.Name())
	case BlockedGracePeriod:
		msg = fmt.Sprintf("Node %s does not exist in the cloud provider but has been NotReady only since %s; it is deleted when it stays NotReady for longer than %s",
			n.Name, ch.since.UTC().Format(time.RFC3339), c.opts.DeletionGracePeriod)
	case BlockedUnconfirmed:
		msg = fmt.Sprintf("Node %s does not exist in the cloud provider according to one check; waiting for a second check to confirm", n.Name)
	case BlockedBudget:
		b := c.budget(p)
		used := b.used(c.now())
		msg = fmt.Sprintf("Node %s does not exist in the cloud provider, but the deletion budget of provider %s is used up (%d of %d deletions per %s); it is retried later",
			n.Name, p.Name(), used, b.limit(ch.owned+used), b.window)
	}
	// Waiting out the grace period and the confirmation is what every
	// ordinary node removal goes through: progress, not a problem. A failed
	// or empty listing and a used-up budget need a person.
	eventType := v1.EventTypeWarning
	if reason == BlockedGracePeriod || reason == BlockedUnconfirmed {
		eventType = v1.EventTypeNormal
	}
	c.recorder.Event(n, eventType, ReasonNodeDeletionBlocked, msg)
}

// budget returns p's deletion budget.
func (c *controller) budget(p *cloud.Provider) *deletionBudget {
	b, ok := c.budgets[p]
	if !ok {
		b = &deletionBudget{percent: c.opts.DeletionBudgetPercent, min: c.opts.DeletionBudgetMin, window: c.opts.DeletionBudgetWindow}
		c.budgets[p] = b
	}
	return b
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
		delete(c.strikes, uid)
		delete(c.reported, uid)
		delete(c.clocks, uid)
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
// taint, with a patch conditional on the version it was computed from, retried on
// conflict from a fresh read.
func (c *controller) setShutdownTaint(ctx context.Context, node *v1.Node, add bool) error {
	first := true
	err := retry.RetryOnConflict(taintBackoff, func() error {
		current := node
		if !first {
			current = &v1.Node{}
			if err := c.reader.Get(ctx, client.ObjectKeyFromObject(node), current); err != nil {
				return err
			}
		}
		first = false
		taints := slices.DeleteFunc(slices.Clone(current.Spec.Taints), func(t v1.Taint) bool { return t.Key == shutdownTaint.Key })
		if add {
			taints = append(taints, shutdownTaint)
		}
		if slices.Equal(taints, current.Spec.Taints) {
			return nil
		}
		if taints == nil {
			taints = []v1.Taint{}
		}
		data, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": current.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		})
		if err != nil {
			return err
		}
		target := &v1.Node{}
		target.Name = current.Name
		return c.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, data))
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set shutdown taint of node %s to %v: %w", node.Name, add, err)
	}
	return nil
}

func hasTaint(node *v1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}
