package minicloud

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/pkg/annotations"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// TestValidateLoadBalancer: the dry run refuses what EnsureLoadBalancer
// would (a setting minicloud cannot implement, a full VIP pool) as a
// stratus.RejectedError, accepts a valid Service, and creates nothing.
func TestValidateLoadBalancer(t *testing.T) {
	ctx := context.Background()
	vips := netip.MustParsePrefix(fmt.Sprintf("127.%d.%d.0/30", 100+mrand.IntN(100), mrand.IntN(256)))
	mc, cloud := startCloud(t, minicloudtest.Options{VIPCIDR: vips, NoDataPlane: true})
	lb, _ := cloud.LoadBalancer()
	v := lb.(stratus.LoadBalancerValidator)
	svc := func(name string) *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
		}
	}
	if err := v.ValidateLoadBalancer(ctx, cluster, svc("web")); err != nil {
		t.Fatalf("valid Service: %v", err)
	}
	sctp := svc("sctp")
	sctp.Spec.Ports[0].Protocol = v1.ProtocolSCTP
	if err := v.ValidateLoadBalancer(ctx, cluster, sctp); !stratus.IsRejected(err) || !strings.Contains(err.Error(), "spec.ports[0].protocol") {
		t.Errorf("SCTP: %v; want a rejection naming spec.ports[0].protocol", err)
	}
	slow := svc("slow")
	slow.Annotations = map[string]string{annotations.LBHealthCheckTimeout.Name: "10s"} // longer than the 5 s default interval
	if err := v.ValidateLoadBalancer(ctx, cluster, slow); !stratus.IsRejected(err) || !strings.Contains(err.Error(), annotations.LBHealthCheckTimeout.Name) {
		t.Errorf("timeout beyond the default interval: %v; want a rejection naming the annotation", err)
	}
	if lbs, _ := mc.Client.ListLoadBalancers(ctx, client.ListOptions{}); len(lbs) != 0 {
		t.Fatalf("dry runs created %d load balancers", len(lbs))
	}
	// Fill the pool; the next Service has no address, the existing ones still validate.
	var last error
	for i := 0; last == nil && i < 10; i++ {
		_, last = mc.Client.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: fmt.Sprintf("filler-%d", i), Listeners: []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 30080}}})
	}
	if !client.IsConflict(last) {
		t.Fatalf("filling the %s pool: %v", vips, last)
	}
	err := v.ValidateLoadBalancer(ctx, cluster, svc("late"))
	if !stratus.IsRejected(err) || !strings.Contains(err.Error(), "no free load balancer address") {
		t.Errorf("full pool: %v; want a rejection saying no address is free", err)
	}
	mc.Stop()
	if err := v.ValidateLoadBalancer(ctx, cluster, svc("web")); err == nil || stratus.IsRejected(err) || !stratus.IsTransient(err) {
		t.Errorf("cloud down: %v; want a transient error, not a rejection", err)
	}
}
