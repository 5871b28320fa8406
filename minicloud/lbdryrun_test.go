package minicloud_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// TestLoadBalancerDryRun: the dry run answers what the create would, and
// stores nothing: an invalid spec is 400, a full VIP pool 409 (while the
// name of an existing load balancer, whose update keeps its VIP, is still
// accepted), and the address it tried is still free for the next create.
func TestLoadBalancerDryRun(t *testing.T) {
	vips := netip.MustParsePrefix(fmt.Sprintf("127.%d.%d.0/30", 100+rand.IntN(100), rand.IntN(256)))
	mc := minicloudtest.Start(t, minicloudtest.Options{VIPCIDR: vips, NoDataPlane: true})
	ctx := context.Background()
	c := mc.Client
	spec := func(name string) api.LoadBalancerSpec {
		return api.LoadBalancerSpec{Name: name, Listeners: []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 30080}}}
	}

	bad := spec("bad")
	bad.Listeners[0].Protocol = "SCTP"
	if err := c.ValidateLoadBalancer(ctx, bad); !client.IsInvalid(err) {
		t.Errorf("dry run of an SCTP listener = %v; want 400", err)
	}
	missing := spec("missing")
	missing.Targets = []api.Target{{InstanceID: "i-nope"}}
	if err := c.ValidateLoadBalancer(ctx, missing); !client.IsInvalid(err) {
		t.Errorf("dry run with a missing target instance = %v; want 400", err)
	}

	var created []string
	for i := 0; ; i++ {
		name := fmt.Sprintf("lb-%d", i)
		verdict := c.ValidateLoadBalancer(ctx, spec(name))
		_, err := c.CreateLoadBalancer(ctx, spec(name))
		if (verdict == nil) != (err == nil) {
			t.Fatalf("load balancer %d: dry run %v, create %v: they must agree", i, verdict, err)
		}
		if err != nil {
			if !client.IsConflict(verdict) {
				t.Fatalf("dry run with the pool full = %v; want 409", verdict)
			}
			break
		}
		created = append(created, name)
		if i > 10 {
			t.Fatalf("a %s pool took more than 10 load balancers", vips)
		}
	}
	if len(created) == 0 {
		t.Fatalf("the %s pool took no load balancer", vips)
	}
	if err := c.ValidateLoadBalancer(ctx, spec(created[0])); err != nil {
		t.Errorf("dry run of an existing load balancer's update with the pool full = %v; want accepted", err)
	}
	lbs, err := c.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil || len(lbs) != len(created) {
		t.Fatalf("load balancers after the dry runs: %d, %v; want the %d created", len(lbs), err, len(created))
	}
}
