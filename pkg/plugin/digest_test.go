package plugin_test

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/plugin"
	"github.com/stratus-ccm/stratus/pkg/stratus"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// The load-balancer-absent mark crosses the wire (the provider then creates
// without a lookup, as in process), and so do the backends digests: the
// plugin's digest for a Service and its nodes is the one its listing
// carries.
func TestLoadBalancerMarksAndDigestsAsPlugin(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{NoDataPlane: true})
	inst, err := mc.Client.CreateInstance(ctx, api.InstanceCreate{Name: "n1", Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []*v1.Node{node("n1", mcprovider.ProviderID(inst.ID))}
	addr := socket(t)
	serve(t, mcprovider.NewFromClient(mc.Client), plugin.ServeOptions{Address: addr, ProviderName: "minicloud"})
	lb, _ := dial(t, plugin.Config{Address: addr}).LoadBalancer()
	service := func(name, uid string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: k8stypes.UID(uid)},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}}}
	}
	lookups := func() int64 {
		t.Helper()
		s, err := mc.Client.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.Requests["GET /v1/load-balancers"]
	}

	before := lookups()
	if _, err := lb.EnsureLoadBalancer(stratus.WithLoadBalancerAbsent(ctx), "c1", service("absent", "1b0c8f6e-1f4e-4d4a-9d5e-3f4b5c6d7e8f"), nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer with the absent mark: %v", err)
	}
	if n := lookups() - before; n != 0 {
		t.Errorf("EnsureLoadBalancer with the absent mark looked the load balancer up %d times; want none (the mark lost on the wire)", n)
	}
	web := service("web", "2b0c8f6e-1f4e-4d4a-9d5e-3f4b5c6d7e8f")
	before = lookups()
	if _, err := lb.EnsureLoadBalancer(ctx, "c1", web, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	if n := lookups() - before; n == 0 {
		t.Error("EnsureLoadBalancer without the mark made no lookup: the test cannot tell the mark's effect")
	}

	digester, ok := lb.(stratus.BackendsDigester)
	if !ok {
		t.Fatal("the plugin's LoadBalancer is no BackendsDigester")
	}
	want, ok := digester.BackendsDigest(ctx, "c1", web, nodes)
	if !ok || want == "" {
		t.Fatalf("BackendsDigest through the plugin = %q, %v; want a digest", want, ok)
	}
	if other, ok := digester.BackendsDigest(ctx, "c1", web, nil); !ok || other == want {
		t.Errorf("BackendsDigest without nodes = %q, %v; want another digest than %s", other, ok, want)
	}
	if d, ok := digester.BackendsDigest(ctx, "c1", web, []*v1.Node{node("unnamed", "")}); ok {
		t.Errorf("BackendsDigest of a node without a provider ID = %q, true; want false", d)
	}
	refs, err := lb.(stratus.LoadBalancerLister).ListLoadBalancers(ctx, "c1")
	if err != nil || len(refs) != 2 {
		t.Fatalf("ListLoadBalancers = %+v, %v; want two", refs, err)
	}
	for _, r := range refs {
		if r.Backends != want {
			t.Errorf("listed %s with backends %q, want %q", r.Name, r.Backends, want)
		}
	}
}
