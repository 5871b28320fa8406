package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/internal/controller/node/nodetest"
)

// A burst of 500 joining nodes is initialized from a few instance listings
// through the cloud layer's instance cache, not from 500 per-node calls.
func TestBurstOfJoiningNodesUsesListings(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	const nodes = 500
	c := nodetest.NewCloud("test")
	for i := range nodes {
		name := fmt.Sprintf("burst-%03d", i)
		c.AddInstance(name, cloudprovider.InstanceMetadata{
			InstanceType:  "small",
			Zone:          "z1",
			Region:        "r1",
			NodeAddresses: []v1.NodeAddress{internal(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))},
		})
	}
	h := start(t, single(c.Listing()), Options{})

	g, ctx := errgroup.WithContext(h.Ctx)
	g.SetLimit(20)
	for i := range nodes {
		g.Go(func() error {
			_, err := h.CS.CoreV1().Nodes().Create(ctx, burstNode(h, fmt.Sprintf("burst-%03d", i)), metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("create nodes: %v", err)
	}
	remaining := func() int {
		list, err := h.CS.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: nodetest.ScopeLabel + "=" + h.Scope()})
		if err != nil {
			t.Fatalf("list nodes: %v", err)
		}
		n := 0
		for i := range list.Items {
			if nodetest.HasTaint(&list.Items[i], uninitialized) {
				n++
			}
		}
		return n
	}
	h.Eventually(4*time.Minute, "every node initialized", func() bool { return remaining() == 0 })

	calls := c.TotalCalls()
	t.Logf("%d nodes initialized with %d cloud calls (%d listings, %d metadata calls)",
		nodes, calls, c.Calls("ListInstances"), c.Calls("InstanceMetadata"))
	if calls > nodes/10 {
		t.Errorf("%d cloud calls for %d nodes; want far fewer than one per node", calls, nodes)
	}
	n := h.Node("burst-123")
	if n.Spec.ProviderID != "test://burst-123" || n.Labels["topology.kubernetes.io/zone"] != "z1" || len(n.Status.Addresses) != 1 {
		t.Errorf("burst-123 = providerID %q labels %v addresses %v", n.Spec.ProviderID, n.Labels, n.Status.Addresses)
	}
}

// burstNode is a node as kubelet registers it with an external cloud provider.
func burstNode(h *nodetest.Harness, name string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodetest.ScopeLabel: h.Scope()}}}
	nodetest.Uninitialized(n)
	return n
}
