package route

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// clientBuilder hands the test API server's admin config to a provider's
// Initialize, as the manager does.
type clientBuilder struct{ cfg *rest.Config }

func (b clientBuilder) Config(string) (*rest.Config, error) { return rest.CopyConfig(b.cfg), nil }
func (b clientBuilder) ConfigOrDie(string) *rest.Config     { return rest.CopyConfig(b.cfg) }
func (b clientBuilder) Client(string) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(b.cfg)
}
func (b clientBuilder) ClientOrDie(name string) kubernetes.Interface {
	c, err := b.Client(name)
	if err != nil {
		panic(err)
	}
	return c
}

// With minicloud: nodes' pod CIDRs become minicloud routes to their instances
// (found by node name, or by provider ID when the names differ), tagged with the
// cluster; NetworkUnavailable turns False; a deleted node's route goes.
func TestMinicloudRoutes(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	env := testenv.Get(t)
	prov := mcprovider.NewFromClient(mc.Client)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	prov.Initialize(clientBuilder{env.Config}, stop)

	instances := map[string]*api.Instance{}
	for _, name := range []string{"mc-r1", "mc-r2-vm"} {
		inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: name, Type: "mc.small", Zone: "mc-central-a"})
		if err != nil {
			t.Fatal(err)
		}
		instances[name] = inst
	}

	h := &harness{t: t, cs: env.Clientset(t)}
	h.deleteNodes()
	mgr := newManager(t)
	started, err := Add(mgr, cloud.Single(cloud.NewProvider(mcprovider.ProviderName, prov)), defaultTestOptions())
	if err != nil || !started {
		t.Fatalf("Add = %v, %v; want started", started, err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		h.deleteNodes()
	})

	h.createNode("mc-r1", instances["mc-r1"].PrivateIP, []string{"10.120.1.0/24"})
	other := newNode("mc-r2", instances["mc-r2-vm"].PrivateIP, []string{"10.120.2.0/24"})
	other.Spec.ProviderID = mcprovider.ProviderID(instances["mc-r2-vm"].ID)
	h.create(other)

	cloudRoutes := func() []string {
		rts, err := mc.Client.ListRoutes(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagCluster: testCluster}})
		if err != nil {
			t.Fatalf("list minicloud routes: %v", err)
		}
		var out []string
		for _, r := range rts {
			out = append(out, fmt.Sprintf("%s -> %s (%s)", r.DestinationCIDR, r.TargetInstanceID, r.Tags[mcprovider.TagNode]))
		}
		slices.Sort(out)
		return out
	}
	waitCloud := func(want ...string) {
		t.Helper()
		var got []string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			got = cloudRoutes()
			return slices.Equal(got, want), nil
		})
		if err != nil {
			t.Fatalf("minicloud routes = %v, want %v", got, want)
		}
	}
	waitCloud(
		"10.120.1.0/24 -> "+instances["mc-r1"].ID+" (mc-r1)",
		"10.120.2.0/24 -> "+instances["mc-r2-vm"].ID+" (mc-r2)",
	)
	h.waitCondition("mc-r1", v1.ConditionFalse, "RouteCreated")
	h.waitCondition("mc-r2", v1.ConditionFalse, "RouteCreated")

	// Settled: reconciliations (every 200ms) neither delete nor recreate the
	// routes, also not the one whose node and instance names differ.
	ids := func() []string {
		rts, err := mc.Client.ListRoutes(ctx, client.ListOptions{Tags: map[string]string{mcprovider.TagCluster: testCluster}})
		if err != nil {
			t.Fatalf("list minicloud routes: %v", err)
		}
		var out []string
		for _, r := range rts {
			out = append(out, r.ID)
		}
		return out
	}
	before := ids()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 1500*time.Millisecond, true, func(context.Context) (bool, error) {
		if now := ids(); !slices.Equal(now, before) {
			return false, fmt.Errorf("routes changed from %v to %v", before, now)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}

	if err := h.cs.CoreV1().Nodes().Delete(ctx, "mc-r2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCloud("10.120.1.0/24 -> " + instances["mc-r1"].ID + " (mc-r1)")
}
