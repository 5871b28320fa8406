package nodelifecycle

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/node/nodetest"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// With minicloud: a NotReady node whose instance is stopped gets the shutdown
// taint and stays; one whose instance is deleted is deleted; one whose instance
// runs is left alone.
func TestMinicloudLifecycle(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ids := map[string]string{}
	for _, name := range []string{"mc-running", "mc-stopped", "mc-deleted"} {
		inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: name, Type: "mc.small", Zone: "mc-central-a"})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = inst.ID
	}
	p := cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client), cloud.WithInstanceCacheFreshness(50*time.Millisecond))
	h := start(t, cloud.Single(p), fast)
	for name, id := range ids {
		h.CreateNode(name, nodetest.WithProviderID(mcprovider.ProviderID(id)), nodetest.Ready(v1.ConditionFalse, longAgo))
	}
	// Give the controller a pass over the healthy state first.
	h.Consistently(500*time.Millisecond, "all nodes stay while their instances run", func() bool {
		for name := range ids {
			if n := h.Node(name); n == nil || nodetest.HasTaint(n, shutdownKey) {
				return false
			}
		}
		return true
	})

	if _, err := mc.Client.StopInstance(ctx, ids["mc-stopped"]); err != nil {
		t.Fatal(err)
	}
	if err := mc.Client.DeleteInstance(ctx, ids["mc-deleted"]); err != nil {
		t.Fatal(err)
	}
	h.Eventually(20*time.Second, "mc-stopped tainted as shut down", func() bool {
		n := h.Node("mc-stopped")
		return n != nil && nodetest.HasTaint(n, shutdownKey)
	})
	h.Eventually(20*time.Second, "mc-deleted deleted", gone(h, "mc-deleted"))
	if n := h.Node("mc-running"); n == nil || nodetest.HasTaint(n, shutdownKey) {
		t.Errorf("mc-running: %v, want it untouched", n)
	}
	if h.Node("mc-stopped") == nil {
		t.Error("the node of a stopped instance was deleted")
	}
}
