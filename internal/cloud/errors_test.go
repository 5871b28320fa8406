package cloud

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// TestErrorMessagesSayEachThingOnce pins whole messages of instance questions
// to a real minicloud: the cloud layer names the provider, the question and the
// node once, the provider only what it adds, and the client the request and
// the cloud's answer. These messages end up in events users read.
func TestErrorMessagesSayEachThingOnce(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	newProvider := func() (*Provider, string) {
		name := uniqueName("mc")
		return NewProvider(name, mcprovider.NewFromClient(mc.Client), WithBudget(BudgetConfig{MaxRetries: 1})), name
	}

	p, name := newProvider()
	if _, err := p.InstanceShutdown(ctx, node); err == nil || err.Error() != "provider "+name+": check shutdown of node n1: the provider's instance listing is empty" {
		t.Errorf("InstanceShutdown with no instances: %v", err)
	}

	if _, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: "other", Type: "mc.small", Zone: "mc-central-a"}); err != nil {
		t.Fatal(err)
	}
	p, name = newProvider()
	if _, err := p.InstanceMetadata(ctx, node); err == nil || err.Error() != "provider "+name+": get instance metadata of node n1: instance not found" {
		t.Errorf("InstanceMetadata of a node without an instance: %v", err)
	}

	if _, err := mc.Client.SetFaults(ctx, api.Faults{ThrottleRate: 1, Operations: []string{"GET /v1/instances"}}); err != nil {
		t.Fatal(err)
	}
	const throttled = "minicloud GET /v1/instances: 429 throttled: request rate limit exceeded (retry after 1s)"
	p, name = newProvider()
	if _, err := p.InstanceExists(ctx, node); err == nil || err.Error() != "provider "+name+": check the instance of node n1: list instances: "+throttled {
		t.Errorf("InstanceExists while listings are throttled: %v", err)
	}
	if _, _, err := p.ListInstances(ctx); err == nil || err.Error() != "provider "+name+": list instances: "+throttled {
		t.Errorf("ListInstances while listings are throttled: %v", err)
	}
}
