package plugin_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/fake"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/plugin"
	"github.com/stratus-ccm/stratus/pkg/stratus"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// The minicloud provider's dry run and capabilities reach the manager
// through the protocol as they are in process: a refusal with its field, a
// full VIP pool, the same capabilities; an upstream provider without them
// gets neither.
func TestLoadBalancerValidationAsPlugin(t *testing.T) {
	ctx := context.Background()
	vips := netip.MustParsePrefix(fmt.Sprintf("127.%d.%d.0/30", 100+rand.IntN(100), rand.IntN(256)))
	mc := minicloudtest.Start(t, minicloudtest.Options{VIPCIDR: vips, NoDataPlane: true})
	in := mcprovider.NewFromClient(mc.Client)
	addr := socket(t)
	serve(t, in, plugin.ServeOptions{Address: addr, ProviderName: "minicloud"})
	p := cloud.NewProvider("mc", dial(t, plugin.Config{Address: addr}))

	inLB, _ := in.LoadBalancer()
	want := inLB.(stratus.LoadBalancerCapable).LoadBalancerCapabilities()
	got, ok := p.LoadBalancerCapabilities()
	if !ok {
		t.Fatal("the plugin's capabilities did not arrive")
	}
	if diff := cmp.Diff(*want, got); diff != "" {
		t.Errorf("capabilities through the plugin (-in process +plugin):\n%s", diff)
	}

	svc := func(name string, proto v1.Protocol) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: proto, Port: 80, NodePort: 30080}}}}
	}
	if ok, err := p.ValidateLoadBalancer(ctx, "c", svc("web", v1.ProtocolTCP)); !ok || err != nil {
		t.Errorf("valid Service: %v, %v; want asked and accepted", ok, err)
	}
	if _, err := p.ValidateLoadBalancer(ctx, "c", svc("sctp", v1.ProtocolSCTP)); !stratus.IsRejected(err) || !strings.Contains(err.Error(), "spec.ports[0].protocol: SCTP") {
		t.Errorf("SCTP: %v; want a rejection naming the field", err)
	}
	for i := 0; i < 10; i++ {
		if _, err := mc.Client.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: fmt.Sprintf("f%d", i), Listeners: []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 1}}}); err != nil {
			break
		}
	}
	if _, err := p.ValidateLoadBalancer(ctx, "c", svc("late", v1.ProtocolTCP)); !stratus.IsRejected(err) || !strings.Contains(err.Error(), "no free load balancer address") {
		t.Errorf("full pool: %v; want a rejection", err)
	}

	upstream := socket(t)
	serve(t, &fake.Cloud{Provider: "fake", Balancers: map[string]fake.Balancer{}}, plugin.ServeOptions{Address: upstream})
	up := cloud.NewProvider("up", dial(t, plugin.Config{Address: upstream}))
	if _, ok := up.LoadBalancerCapabilities(); ok {
		t.Error("an upstream provider declared capabilities through the plugin")
	}
	if ok, err := up.ValidateLoadBalancer(ctx, "c", svc("web", v1.ProtocolTCP)); ok || err != nil {
		t.Errorf("upstream provider's dry run: %v, %v; want not asked", ok, err)
	}
}
