package node

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/node/nodetest"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// A node registered by a kubelet with --cloud-provider=external is initialized
// from its minicloud instance (found by name): provider ID, type and topology
// labels, the cloud's addresses, and the uninitialized taint removed.
func TestMinicloudInitialization(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	inst, err := mc.Client.CreateInstance(context.Background(), api.InstanceCreate{Name: "mc-init-1", Type: "mc.medium", Zone: "mc-central-c", PublicIP: true})
	if err != nil {
		t.Fatal(err)
	}
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	h := start(t, clouds, Options{})
	h.CreateNode("mc-init-1", nodetest.Uninitialized, nodetest.WithAddresses(v1.NodeAddress{Type: v1.NodeHostName, Address: "mc-init-1"}))
	h.Eventually(30*time.Second, "mc-init-1 initialized", initialized(h, "mc-init-1"))

	n := h.Node("mc-init-1")
	if want := "minicloud://" + inst.ID; n.Spec.ProviderID != want {
		t.Errorf("providerID = %q, want %q", n.Spec.ProviderID, want)
	}
	for k, want := range map[string]string{
		v1.LabelInstanceTypeStable: "mc.medium", v1.LabelInstanceType: "mc.medium",
		v1.LabelTopologyZone: "mc-central-c", v1.LabelFailureDomainBetaZone: "mc-central-c",
		v1.LabelTopologyRegion: "mc-central", v1.LabelFailureDomainBetaRegion: "mc-central",
	} {
		if got := n.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	wantAddrs := []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: inst.PrivateIP},
		{Type: v1.NodeExternalIP, Address: inst.PublicIP},
		{Type: v1.NodeHostName, Address: "mc-init-1"},
	}
	if diff := cmp.Diff(wantAddrs, n.Status.Addresses); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
}

// The Warning event of a node whose instance listing is throttled says each
// thing once: the provider, the call, the node, and the cloud's answer.
func TestMinicloudThrottledListingEvent(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	if _, err := mc.Client.SetFaults(context.Background(), api.Faults{ThrottleRate: 1, Operations: []string{"GET /v1/instances"}}); err != nil {
		t.Fatal(err)
	}
	clouds := cloud.Single(cloud.NewProvider("mc", mcprovider.NewFromClient(mc.Client), cloud.WithBudget(cloud.BudgetConfig{MaxRetries: 1})))
	h := start(t, clouds, Options{})
	h.CreateNode("n1", nodetest.Uninitialized)
	h.Eventually(30*time.Second, "InitializationFailed event", func() bool { return len(h.Events("n1", ReasonInitializationFailed)) > 0 })
	got := h.Events("n1", ReasonInitializationFailed)[0].Message
	want := "Node stays tainted with node.cloudprovider.kubernetes.io/uninitialized and is retried: " +
		"provider mc: get instance metadata of node n1: list instances: " +
		"minicloud GET /v1/instances: 429 throttled: request rate limit exceeded (retry after 1s)"
	if got != want {
		t.Errorf("event message\n%s\nwant\n%s", got, want)
	}
}
