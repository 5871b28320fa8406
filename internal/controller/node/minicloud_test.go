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
