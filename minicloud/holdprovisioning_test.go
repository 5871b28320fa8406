package minicloud_test

import (
	"context"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// TestHoldProvisioning: with the hold_provisioning fault a load balancer
// stays provisioning past its provisioning delay (checked over twenty
// delays), and becomes active once the fault is cleared.
func TestHoldProvisioning(t *testing.T) {
	const delay = 50 * time.Millisecond
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: delay})
	ctx := context.Background()
	c := mc.Client
	if _, err := c.SetFaults(ctx, api.Faults{HoldProvisioning: true}); err != nil {
		t.Fatal(err)
	}
	lb, err := c.CreateLoadBalancer(ctx, api.LoadBalancerSpec{
		Name:      "held",
		Listeners: []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 30080}},
	})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(20 * delay)
	tick := time.NewTicker(delay / 2)
	defer tick.Stop()
	for time.Now().Before(until) {
		got, err := c.GetLoadBalancer(ctx, lb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.LBProvisioning {
			t.Fatalf("load balancer %s while provisioning is held, want %s", got.State, api.LBProvisioning)
		}
		<-tick.C
	}
	if _, err := c.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "the load balancer active once the hold is cleared", func(ctx context.Context) (bool, error) {
		got, err := c.GetLoadBalancer(ctx, lb.ID)
		return err == nil && got.State == api.LBActive, err
	})
}
