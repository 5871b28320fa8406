package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/node/nodetest"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOGS") != "" {
		log.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 2}))
	} else {
		log.SetLogger(logr.Discard())
	}
	testenv.Main(m)
}

const shutdownKey = "node.cloudprovider.kubernetes.io/shutdown"

// fast are options that let a test see several passes and confirmations quickly.
// The budget allows every deletion, except in the test of the budget.
var fast = Options{MonitorPeriod: 100 * time.Millisecond, ConfirmationInterval: 100 * time.Millisecond, DeletionBudgetPercent: 100}

// provider wraps raw with a short instance-cache freshness, so that a listing
// taken after a change in the cloud sees it.
func provider(raw cloudprovider.Interface) *cloud.Provider {
	return cloud.NewProvider("test", raw, cloud.WithInstanceCacheFreshness(50*time.Millisecond))
}

func start(t *testing.T, clouds *cloud.Set, opts Options) *nodetest.Harness {
	t.Helper()
	return nodetest.Start(t, nodetest.Config{}, func(mgr manager.Manager) (bool, error) { return Add(mgr, clouds, opts) })
}

// longAgo is a NotReady transition far past every grace period.
var longAgo = time.Now().Add(-time.Hour)

func gone(h *nodetest.Harness, name string) func() bool {
	return func() bool { return h.Node(name) == nil }
}

// variants runs a test with a per-node provider and with a listing one.
func variants(t *testing.T, run func(t *testing.T, c *nodetest.Cloud, raw cloudprovider.Interface)) {
	t.Run("per node", func(t *testing.T) {
		c := nodetest.NewCloud("test")
		run(t, c, c)
	})
	t.Run("listing", func(t *testing.T) {
		c := nodetest.NewCloud("test")
		run(t, c, c.Listing())
	})
}

// upstream behavior B10: a NotReady node whose instance is gone is deleted, with
// the upstream events; a Ready one never is, and a NotReady one whose instance
// exists stays.
func TestDeleteGoneNotReadyNode(t *testing.T) {
	variants(t, func(t *testing.T, c *nodetest.Cloud, raw cloudprovider.Interface) {
		c.AddInstance("alive", cloudprovider.InstanceMetadata{})
		h := start(t, cloud.Single(provider(raw)), fast)
		h.CreateNode("gone", nodetest.WithProviderID(c.ProviderID("gone")), nodetest.Ready(v1.ConditionFalse, longAgo))
		h.CreateNode("unknown-gone", nodetest.WithProviderID(c.ProviderID("unknown-gone")), nodetest.Ready(v1.ConditionUnknown, longAgo))
		h.CreateNode("ready-gone", nodetest.WithProviderID(c.ProviderID("ready-gone")), nodetest.Ready(v1.ConditionTrue, longAgo))
		h.CreateNode("alive", nodetest.WithProviderID(c.ProviderID("alive")), nodetest.Ready(v1.ConditionFalse, longAgo))

		h.Eventually(20*time.Second, "gone deleted", gone(h, "gone"))
		h.Eventually(20*time.Second, "unknown-gone deleted", gone(h, "unknown-gone"))
		h.Eventually(10*time.Second, "DeletingNode event", func() bool { return len(h.Events("gone", ReasonDeletingNode)) == 1 })
		ev := h.Events("gone", ReasonDeletingNode)[0]
		if ev.Type != v1.EventTypeNormal || ev.Source.Component != Component || ev.InvolvedObject.APIVersion != "v1" ||
			ev.Message != "Deleting node gone because it does not exist in the cloud provider" {
			t.Errorf("DeletingNode event = %+v", ev)
		}
		// The first answer alone did not delete it.
		if len(h.Events("gone", ReasonNodeDeletionBlocked)) == 0 {
			t.Error("no NodeDeletionBlocked event before the confirmation")
		}
		h.Consistently(time.Second, "ready and existing nodes stay", func() bool {
			return h.Node("ready-gone") != nil && h.Node("alive") != nil
		})
	})
}

// upstream behavior B10 (v1): a node without provider ID whose InstanceID lookup
// says InstanceNotFound is deleted; a provider error leaves the node alone.
func TestDeleteV1(t *testing.T) {
	t.Run("InstanceNotFound", func(t *testing.T) {
		f := &fake.Cloud{Provider: "fake", ExtIDErr: map[types.NodeName]error{"v1-gone": cloudprovider.InstanceNotFound}}
		h := start(t, cloud.Single(cloud.NewProvider("fake", f)), fast)
		h.CreateNode("v1-gone", nodetest.Ready(v1.ConditionFalse, longAgo))
		h.Eventually(20*time.Second, "v1-gone deleted", gone(h, "v1-gone"))
	})
	t.Run("provider error", func(t *testing.T) {
		f := &fake.Cloud{Provider: "fake", ErrByProviderID: errors.New("cloud down")}
		h := start(t, cloud.Single(cloud.NewProvider("fake", f)), fast)
		n := h.CreateNode("v1-error", nodetest.WithProviderID("fake://v1-error"), nodetest.Ready(v1.ConditionFalse, longAgo))
		h.Consistently(2*time.Second, "v1-error untouched", func() bool {
			got := h.Node("v1-error")
			return got != nil && got.ResourceVersion == n.ResourceVersion
		})
	})
}

// upstream behavior B10: the shutdown taint is added to a NotReady node whose
// instance is shut down, keeping other taints, and removed when it is Ready.
func TestShutdownTaint(t *testing.T) {
	variants(t, func(t *testing.T, c *nodetest.Cloud, raw cloudprovider.Interface) {
		c.AddInstance("down", cloudprovider.InstanceMetadata{})
		c.SetShutdown("down", true)
		h := start(t, cloud.Single(provider(raw)), fast)
		h.CreateNode("down", nodetest.WithProviderID(c.ProviderID("down")), nodetest.Ready(v1.ConditionFalse, longAgo),
			nodetest.Tainted("example.com/keep", "yes", v1.TaintEffectNoSchedule))
		h.Eventually(20*time.Second, "shutdown taint", func() bool { return nodetest.HasTaint(h.Node("down"), shutdownKey) })
		n := h.Node("down")
		if !nodetest.HasTaint(n, "example.com/keep") {
			t.Errorf("other taint lost: %v", n.Spec.Taints)
		}
		for _, tt := range n.Spec.Taints {
			if tt.Key == shutdownKey && (tt.Effect != v1.TaintEffectNoSchedule || tt.Value != "") {
				t.Errorf("shutdown taint = %+v", tt)
			}
		}
		c.SetShutdown("down", false)
		h.SetReady("down", v1.ConditionTrue, time.Now())
		h.Eventually(20*time.Second, "shutdown taint removed", func() bool { return !nodetest.HasTaint(h.Node("down"), shutdownKey) })
		if n := h.Node("down"); !nodetest.HasTaint(n, "example.com/keep") {
			t.Errorf("other taint lost: %v", n.Spec.Taints)
		}
	})
}

// Deliberate difference: a node NotReady for less than the grace period is not
// deleted, and the guard says so; once the grace period has passed it is. The
// controller runs on a fake clock, so "not yet" is checked at a time the test
// holds still rather than at a moment a slow machine could overrun.
func TestGracePeriod(t *testing.T) {
	c := nodetest.NewCloud("test")
	fc := clocktesting.NewFakeClock(time.Now())
	opts := fast
	opts.DeletionGracePeriod = time.Hour
	opts.Clock = fc
	c.AddInstance("other", cloudprovider.InstanceMetadata{}) // the listing is not empty
	h := start(t, cloud.Single(provider(c.Listing())), opts)
	h.CreateNode("young", nodetest.WithProviderID(c.ProviderID("young")), nodetest.Ready(v1.ConditionFalse, fc.Now()))
	// Waiting out the grace period is ordinary progress: a Normal event.
	h.Eventually(10*time.Second, "GracePeriod event", func() bool {
		evs := h.Events("young", ReasonNodeDeletionBlocked)
		return len(evs) > 0 && evs[0].Type == v1.EventTypeNormal && strings.Contains(evs[0].Message, "NotReady only since")
	})
	// The clock has not moved since that pass, so no pass can have found the
	// grace period over.
	if h.Node("young") == nil {
		t.Fatal("deleted within the grace period")
	}
	fc.Step(opts.DeletionGracePeriod)
	h.Eventually(20*time.Second, "deleted after the grace period", func() bool {
		fc.Step(opts.MonitorPeriod) // the next pass
		return h.Node("young") == nil
	})
}

// A node that never had a Ready condition is NotReady since its creation, and
// its grace period keeps running when the Ready condition then appears as
// Unknown (kube-controller-manager stamps it with its own, later, transition
// time): the node is deleted once the grace period from its creation has
// passed, with one GracePeriod event.
func TestGraceClockKeepsRunning(t *testing.T) {
	c := nodetest.NewCloud("test")
	opts := fast
	opts.DeletionGracePeriod = 10 * time.Second
	c.AddInstance("other", cloudprovider.InstanceMetadata{}) // the listing is not empty
	h := start(t, cloud.Single(provider(c.Listing())), opts)
	n := h.CreateNode("never-ready", nodetest.WithProviderID(c.ProviderID("never-ready")))
	graceEvents := func() []v1.Event {
		var out []v1.Event
		for _, ev := range h.Events("never-ready", ReasonNodeDeletionBlocked) {
			if strings.Contains(ev.Message, "NotReady only since") {
				out = append(out, ev)
			}
		}
		return out
	}
	h.Eventually(10*time.Second, "GracePeriod event", func() bool { return len(graceEvents()) > 0 })
	if created := n.CreationTimestamp.UTC().Format(time.RFC3339); !strings.Contains(graceEvents()[0].Message, "since "+created) {
		t.Errorf("GracePeriod event %q; want NotReady since the creation, %s", graceEvents()[0].Message, created)
	}
	// The Unknown condition arrives with a transition time an hour on: were the
	// clock restarted by it, the node would be held back for an hour.
	h.SetReady("never-ready", v1.ConditionUnknown, time.Now().Add(time.Hour))
	h.Eventually(30*time.Second, "deleted once the grace period from its creation passed", gone(h, "never-ready"))
	if evs := graceEvents(); len(evs) != 1 || evs[0].Count != 1 {
		t.Errorf("GracePeriod events = %+v, want one, once", evs)
	}
}

// A node held back for several reasons in turn is told each reason once:
// a listing that fails, recovers and fails again gives one ListingFailed event.
func TestNodeDeletionBlockedOncePerReason(t *testing.T) {
	c := nodetest.NewCloud("test")
	opts := fast
	opts.DeletionGracePeriod = time.Hour
	c.AddInstance("other", cloudprovider.InstanceMetadata{})
	c.SetListError(errors.New("503 from the cloud API"))
	h := start(t, cloud.Single(provider(c.Listing())), opts)
	h.CreateNode("flapping", nodetest.WithProviderID(c.ProviderID("flapping")), nodetest.Ready(v1.ConditionFalse, time.Now()))
	count := func(reason BlockReason) func() float64 {
		return func() float64 { return testutil.ToFloat64(deletionBlocked.WithLabelValues("test", string(reason))) }
	}
	hasEvent := func(text string) func() bool {
		return func() bool {
			for _, ev := range h.Events("flapping", ReasonNodeDeletionBlocked) {
				if strings.Contains(ev.Message, text) {
					return true
				}
			}
			return false
		}
	}
	h.Eventually(10*time.Second, "ListingFailed event", hasEvent("listing of provider test failed"))
	c.SetListError(nil)
	h.Eventually(10*time.Second, "GracePeriod event", hasEvent("NotReady only since"))
	failed := count(BlockedListingFailed)()
	c.SetListError(errors.New("503 from the cloud API"))
	h.Eventually(10*time.Second, "three more passes held back by the failed listing", func() bool { return count(BlockedListingFailed)() >= failed+3 })
	var listing []v1.Event
	for _, ev := range h.Events("flapping", ReasonNodeDeletionBlocked) {
		if strings.Contains(ev.Message, "listing") {
			listing = append(listing, ev)
		}
	}
	if len(listing) != 1 || listing[0].Count != 1 {
		t.Errorf("ListingFailed events = %+v, want one, once", listing)
	}
}

// Deliberate difference: an empty listing (an API outage) or a failed one while
// the provider owns nodes deletes nothing, and says why.
func TestListingOutageDeletesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason BlockReason
		break_ func(c *nodetest.Cloud)
	}{
		{"empty", BlockedEmptyListing, func(c *nodetest.Cloud) {}},
		{"failed", BlockedListingFailed, func(c *nodetest.Cloud) { c.SetListError(errors.New("503 from the cloud API")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nodetest.NewCloud("test")
			tc.break_(c)
			before := testutil.ToFloat64(deletionBlocked.WithLabelValues("test", string(tc.reason)))
			h := start(t, cloud.Single(provider(c.Listing())), fast)
			var names []string
			for i := range 3 {
				name := fmt.Sprintf("outage-%s-%d", tc.name, i)
				names = append(names, name)
				h.CreateNode(name, nodetest.WithProviderID(c.ProviderID(name)), nodetest.Ready(v1.ConditionFalse, longAgo))
			}
			h.Eventually(10*time.Second, "NodeDeletionBlocked event", func() bool {
				evs := h.Events(names[0], ReasonNodeDeletionBlocked)
				return len(evs) > 0
			})
			h.Consistently(2*time.Second, "no node deleted", func() bool {
				for _, n := range names {
					if h.Node(n) == nil {
						return false
					}
				}
				return true
			})
			// Twenty passes held the node back; one event says so.
			if evs := h.Events(names[0], ReasonNodeDeletionBlocked); len(evs) != 1 || evs[0].Count != 1 || !strings.Contains(evs[0].Message, "listing") {
				t.Errorf("NodeDeletionBlocked events = %+v, want one, once", evs)
			}
			if after := testutil.ToFloat64(deletionBlocked.WithLabelValues("test", string(tc.reason))); after <= before {
				t.Errorf("stratus_node_deletion_blocked_total{reason=%q} did not grow", tc.reason)
			}
		})
	}
}

// Deliberate difference: the deletion budget stops a mass deletion: of 20 nodes
// whose instances all vanished, 2 (10%) are deleted per window.
func TestBudgetStopsMassDeletion(t *testing.T) {
	c := nodetest.NewCloud("test")
	// One instance survives, so the listing is not empty.
	c.AddInstance("survivor", cloudprovider.InstanceMetadata{})
	opts := fast
	opts.DeletionBudgetPercent = 0 // the default, 10%
	h := start(t, cloud.Single(provider(c.Listing())), opts)
	h.CreateNode("survivor", nodetest.WithProviderID(c.ProviderID("survivor")), nodetest.Ready(v1.ConditionTrue, longAgo))
	var names []string
	for i := range 19 {
		name := fmt.Sprintf("mass-%02d", i)
		names = append(names, name)
		h.CreateNode(name, nodetest.WithProviderID(c.ProviderID(name)), nodetest.Ready(v1.ConditionFalse, longAgo))
	}
	remaining := func() int {
		n := 0
		for _, name := range names {
			if h.Node(name) != nil {
				n++
			}
		}
		return n
	}
	h.Eventually(20*time.Second, "two deletions", func() bool { return remaining() == 17 })
	h.Consistently(2*time.Second, "no further deletion", func() bool { return remaining() == 17 })
	// Every node held back says why. (A deleted node may have been held back too,
	// while the cache had not yet seen all twenty.)
	for _, name := range names {
		if h.Node(name) == nil {
			continue
		}
		found := false
		for _, ev := range h.Events(name, ReasonNodeDeletionBlocked) {
			found = found || ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, "deletion budget")
		}
		if !found {
			t.Errorf("node %s held back without a budget event", name)
		}
	}
}

// A node whose provider ID names another provider is never checked nor written,
// even NotReady and shut down.
func TestForeignNodeUntouched(t *testing.T) {
	c := nodetest.NewCloud("test")
	h := start(t, cloud.Single(provider(c)), fast)
	n := h.CreateNode("foreign", nodetest.WithProviderID("aws://i-0abc"), nodetest.Ready(v1.ConditionFalse, longAgo))
	h.CreateNode("ours", nodetest.WithProviderID(c.ProviderID("ours")), nodetest.Ready(v1.ConditionFalse, longAgo))
	h.Eventually(20*time.Second, "our gone node deleted", gone(h, "ours"))
	h.Consistently(time.Second, "foreign node untouched", func() bool {
		got := h.Node("foreign")
		return got != nil && got.ResourceVersion == n.ResourceVersion
	})
	if len(h.Events("foreign", "")) != 0 {
		t.Errorf("events about the foreign node: %v", h.Events("foreign", ""))
	}
}

// Add rejects invalid options, naming them, and does not start without an
// instances-capable provider.
func TestAddOptions(t *testing.T) {
	env := testenv.Get(t)
	mgr, err := manager.New(env.Config, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	c := nodetest.NewCloud("test")
	if _, err := Add(mgr, cloud.Single(provider(c)), Options{DeletionGracePeriod: -time.Second}); err == nil || !strings.Contains(err.Error(), "--node-deletion-grace-period") {
		t.Errorf("negative grace period: err = %v", err)
	}
	started, err := Add(mgr, cloud.Single(cloud.NewProvider("fake", &fake.Cloud{DisableInstances: true})), Options{})
	if started || err != nil {
		t.Errorf("Add without instances = %v, %v; want not started", started, err)
	}
}

// A delete the API server refuses gives a Warning DeletingNodeFailed event after
// the DeletingNode one, and the node stays.
func TestDeleteFailedEvent(t *testing.T) {
	env := testenv.Get(t)
	admin := env.Clientset(t)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-lifecycle-no-delete"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-lifecycle-no-delete"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "lifecycle-no-delete", APIGroup: "rbac.authorization.k8s.io"}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})

	c := nodetest.NewCloud("test")
	c.AddInstance("other", cloudprovider.InstanceMetadata{})
	h := nodetest.Start(t, nodetest.Config{RestConfig: env.UserConfig(t, "lifecycle-no-delete")}, func(mgr manager.Manager) (bool, error) {
		return Add(mgr, cloud.Single(provider(c.Listing())), fast)
	})
	h.CreateNode("undeletable", nodetest.WithProviderID(c.ProviderID("undeletable")), nodetest.Ready(v1.ConditionFalse, longAgo))
	h.Eventually(20*time.Second, "DeletingNodeFailed event", func() bool {
		evs := h.Events("undeletable", ReasonDeletingNodeFailed)
		return len(evs) > 0 && evs[0].Type == v1.EventTypeWarning && strings.Contains(evs[0].Message, "Failed deleting node undeletable")
	})
	if len(h.Events("undeletable", ReasonDeletingNode)) == 0 {
		t.Error("no DeletingNode event before the failure")
	}
	if h.Node("undeletable") == nil {
		t.Error("node deleted without permission")
	}
}
