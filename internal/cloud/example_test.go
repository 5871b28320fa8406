package cloud_test

import (
	"context"
	"fmt"
	"log"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// Two regions of one cloud share a provider-ID scheme; a provider-ID prefix tells
// their nodes apart, and a load-balancer class picks the region for a Service.
func ExampleBuild() {
	set, err := cloud.Build(cloud.Config{
		Providers: []cloud.ProviderConfig{
			{Name: "east", Type: fakeType, CloudConfig: "scheme: mini", ProviderIDPrefix: "mini://east/"},
			{Name: "west", Type: fakeType, CloudConfig: "scheme: mini", ProviderIDPrefix: "mini://west/",
				LoadBalancerClasses: []string{"example.com/west"}},
		},
		DefaultNodeProvider:         "east",
		DefaultLoadBalancerProvider: "east",
	})
	if err != nil {
		log.Fatal(err)
	}
	name := func(p *cloud.Provider) string {
		if p == nil {
			return "left alone"
		}
		return p.Name()
	}
	for _, id := range []string{"mini://west/i-1", "mini://east/i-2", "mini://north/i-3", ""} {
		fmt.Printf("node %q: %s\n", id, name(set.ForNode(&v1.Node{Spec: v1.NodeSpec{ProviderID: id}})))
	}
	for _, class := range []*string{nil, ptr.To("example.com/west"), ptr.To("example.com/other")} {
		svc := &v1.Service{Spec: v1.ServiceSpec{LoadBalancerClass: class}}
		fmt.Printf("service class %s: %s\n", ptr.Deref(class, "(none)"), name(set.ForService(svc)))
	}
	fmt.Println("routes:", name(set.RoutesProvider()))
	// Output:
	// node "mini://west/i-1": west
	// node "mini://east/i-2": east
	// node "mini://north/i-3": left alone
	// node "": east
	// service class (none): east
	// service class example.com/west: west
	// service class example.com/other: left alone
	// routes: left alone
}

// A call's priority class travels in its context; the provider's budget serves
// higher classes first.
func ExampleWithPriority() {
	set, err := cloud.Build(cloud.FromFlags(fakeType, ""))
	if err != nil {
		log.Fatal(err)
	}
	ctx := cloud.WithPriority(context.Background(), cloud.PriorityNodeInit)
	node := &v1.Node{Spec: v1.NodeSpec{ProviderID: "fake://i-1"}}
	exists, err := set.ForNode(node).InstanceExists(ctx, node)
	fmt.Println(cloud.PriorityFrom(ctx), exists, err)
	// Output: node-init true <nil>
}
