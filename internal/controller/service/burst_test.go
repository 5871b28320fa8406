package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// burstCloud is a minicloud whose provider uses its own token, so that the
// test reads the provider's calls alone; reader is the test's client.
func burstCloud(t *testing.T, delay time.Duration) (mc *minicloudtest.Cloud, reader *client.Client) {
	t.Helper()
	readerToken := minicloudtest.RandomToken()
	mc = minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: delay, NoDataPlane: true, ExtraTokens: []string{readerToken}})
	reader, err := client.New(mc.URL, readerToken)
	if err != nil {
		t.Fatal(err)
	}
	return mc, reader
}

// burstNode creates an instance and its initialized Node.
func burstNode(t *testing.T, h *harness, reader *client.Client, i int) {
	t.Helper()
	inst, err := reader.CreateInstance(context.Background(), api.InstanceCreate{Name: h.nodeName(i), Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	h.createNodes(i, i+1, func(n *v1.Node) { n.Spec.ProviderID = mcprovider.ProviderID(inst.ID) })
}

// New Services' load balancers are created without a lookup before the
// create or a read after it: the Service had no finalizer, so the provider
// creates at once and its answer is the status.
func TestMinicloudBurstCreatesWithoutLookups(t *testing.T) {
	ctx := context.Background()
	mc, reader := burstCloud(t, 0)
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, clouds, Options{ClusterName: "burst-test", ResyncPeriod: time.Hour})
	burstNode(t, h, reader, 0)
	const n = 6
	for i := range n {
		h.createService(lbService(fmt.Sprintf("b%d", i), func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }))
	}
	for i := range n {
		h.waitIngress(fmt.Sprintf("b%d", i), 30*time.Second)
	}
	st, err := mc.Client.TokenStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Requests["POST /v1/load-balancers"]; got != n {
		t.Errorf("%d creates, want %d", got, n)
	}
	if got := st.Requests["GET /v1/load-balancers/{id}"]; got != 0 {
		t.Errorf("%d reads of a load balancer, want none (the create's answer is trusted)", got)
	}
	// The drift check's first listing may come if the test is slow; lookups
	// by name would be one per Service.
	if got := st.Requests["GET /v1/load-balancers"]; got > 1 {
		t.Errorf("%d lookups and listings of load balancers, want at most the drift check's one listing", got)
	}
	lbs, err := reader.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagCluster: "burst-test"}})
	if err != nil || len(lbs) != n {
		t.Errorf("load balancers in the cloud: %d (%v), want %d", len(lbs), err, n)
	}
}

// A new Service whose load balancer provisions is written twice: the
// finalizer, then the status with its ingress and Ready condition (no
// Provisioning condition in between).
func TestNewServiceWrittenTwice(t *testing.T) {
	mc, reader := burstCloud(t, 500*time.Millisecond)
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, clouds, Options{ClusterName: "writes-test", ResyncPeriod: time.Hour})
	burstNode(t, h, reader, 0)
	svc := h.createService(lbService("w", func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }))
	wctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	w, err := h.cs.CoreV1().Services(h.ns).Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=w", ResourceVersion: svc.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var writes []string
	for ev := range w.ResultChan() {
		if ev.Type != watch.Modified {
			continue
		}
		s := ev.Object.(*v1.Service)
		writes = append(writes, fmt.Sprintf("finalizers=%v ingress=%d conditions=%d", s.Finalizers, len(s.Status.LoadBalancer.Ingress), len(s.Status.Conditions)))
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			break
		}
	}
	if wctx.Err() != nil {
		t.Fatalf("no ingress within the deadline; writes so far: %v", writes)
	}
	if len(writes) != 2 {
		t.Errorf("the Service was written %d times until it had ingress, want 2 (finalizer, status):\n%v", len(writes), writes)
	}
	cond := h.waitCondition("w", ReasonReady, 10*time.Second)
	if cond.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition %+v, want True", cond)
	}
}

// A joining node (uninitialized, no provider ID) whose machine the cloud
// layer's instance listing already shows is a backend at once, by that
// machine's ID: its load balancers do not wait for the node controller.
func TestJoiningNodeResolvedFromTheListing(t *testing.T) {
	ctx := context.Background()
	mc, reader := burstCloud(t, 0)
	p := cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client))
	// No node controller runs here: without the listing the node would wait
	// an hour.
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, cloud.Single(p),
		Options{ClusterName: "join-test", NodeInitWait: time.Hour, NodeUpdateWindow: 100 * time.Millisecond})
	burstNode(t, h, reader, 0)
	svc := h.createService(lbService("web", func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }))
	h.waitIngress("web", 30*time.Second)

	joining, err := reader.CreateInstance(ctx, api.InstanceCreate{Name: h.nodeName(1), Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	// The node controller's listing, as it makes one to initialize nodes.
	if _, _, err := p.ListInstances(ctx); err != nil {
		t.Fatal(err)
	}
	h.createNodes(1, 2, func(n *v1.Node) {
		n.Spec.ProviderID = ""
		n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	})
	h.eventually(30*time.Second, "the joining node's machine behind the load balancer", func() (bool, error) {
		lbs, err := reader.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagServiceUID: string(svc.UID)}})
		if err != nil || len(lbs) != 1 {
			return false, nil
		}
		for _, tg := range lbs[0].Targets {
			if tg.InstanceID == joining.ID {
				return len(lbs[0].Targets) == 2, nil
			}
		}
		return false, nil
	})
	if n, err := h.cs.CoreV1().Nodes().Get(ctx, h.nodeName(1), metav1.GetOptions{}); err != nil || n.Spec.ProviderID != "" {
		t.Errorf("the joining Node: %v, provider ID %q; the service controller must not write Nodes", err, n.Spec.ProviderID)
	}
}

// A backend pass that outlasts a burst of joining nodes sends its later load
// balancers the nodes that joined while it ran. Here every update takes a
// second and one worker sends them: node 2 joins once the pass for node 1
// has sent its first update, so the remaining load balancers get nodes 1 and
// 2 in one update, and the pass node 2 starts has only the earlier ones to
// do. Sending each pass's set as it was when the pass started would make two
// updates per load balancer.
func TestPassSendsTheNewestNodeSet(t *testing.T) {
	ctx := context.Background()
	mc, reader := burstCloud(t, 0)
	clouds := cloud.Single(cloud.NewProvider(mcprovider.ProviderName, mcprovider.NewFromClient(mc.Client)))
	h, _ := startIn(t, testenv.Get(t).Namespace(t), nil, clouds,
		Options{ClusterName: "fresh-test", Workers: 1, NodeUpdateWindow: 100 * time.Millisecond, ResyncPeriod: time.Hour})
	var ids [3]string
	for i := range ids {
		inst, err := reader.CreateInstance(ctx, api.InstanceCreate{Name: h.nodeName(i), Type: "mc.small", Zone: "mc-central-a"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = inst.ID
	}
	node := func(i int) {
		h.createNodes(i, i+1, func(n *v1.Node) { n.Spec.ProviderID = mcprovider.ProviderID(ids[i]) })
	}
	node(0)
	const n = 8
	for i := range n {
		h.createService(lbService(fmt.Sprintf("f%d", i), func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }))
	}
	for i := range n {
		h.waitIngress(fmt.Sprintf("f%d", i), 30*time.Second)
	}
	const update = "PUT /v1/load-balancers/{id}"
	if _, err := reader.SetFaults(ctx, api.Faults{LatencyMS: 1000, Operations: []string{update}}); err != nil {
		t.Fatal(err)
	}
	before, err := mc.Client.TokenStats(ctx)
	if err != nil {
		t.Fatal(err)
	}

	node(1)
	h.eventually(30*time.Second, "a first UpdatedLoadBalancer event", func() (bool, error) {
		for i := range n {
			if _, ok := h.findEvent(fmt.Sprintf("f%d", i), "UpdatedLoadBalancer"); ok {
				return true, nil
			}
		}
		return false, nil
	})
	node(2)
	h.eventually(60*time.Second, "every load balancer targeting the three nodes", func() (bool, error) {
		lbs, err := reader.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagCluster: "fresh-test"}})
		if err != nil || len(lbs) != n {
			return false, err
		}
		for _, lb := range lbs {
			if len(lb.Targets) != 3 {
				return false, nil
			}
		}
		return true, nil
	})
	after, err := mc.Client.TokenStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := after.Requests[update] - before.Requests[update]
	if got >= 2*n {
		t.Errorf("%d updates for %d load balancers and two joining nodes: every pass sent the set it started with (want fewer than %d)", got, n, 2*n)
	}
	if got < n {
		t.Errorf("%d updates for %d load balancers: some were never updated", got, n)
	}
	t.Logf("%d updates for %d load balancers and two joining nodes", got, n)
}
