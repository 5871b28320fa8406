package openstack_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	"github.com/stratus-ccm/stratus/providers/openstack"
)

// TestValidateLoadBalancer: the dry run accepts a Service whose networks
// exist, refuses one whose configured subnet or class's floating network
// Neutron does not know (naming the cloud.conf key), an unknown class and a
// protocol the provider lacks, and creates nothing.
func TestValidateLoadBalancer(t *testing.T) {
	le := startLB(t)
	ctx := context.Background()
	lb, _ := le.provider(t, "[LoadBalancerClass \"public\"]\nfloating-network-id = "+le.pubNet+"\n"+
		"[LoadBalancerClass \"gone\"]\nfloating-network-id = 00000000-0000-0000-0000-000000000000\n")
	v := lb.(stratus.LoadBalancerValidator)
	withClass := func(class string) func() error {
		return func() error {
			svc := service(18320, le.port)
			svc.Annotations = map[string]string{openstack.ClassAnnotation: class}
			return v.ValidateLoadBalancer(ctx, "kubernetes", svc)
		}
	}
	sctp := func() error {
		svc := service(18320, le.port)
		svc.Spec.Ports[0].Protocol = "SCTP"
		return v.ValidateLoadBalancer(ctx, "kubernetes", svc)
	}
	for _, tc := range []struct {
		name string
		run  func() error
		want string // in the rejection; "" = accepted
	}{
		{"no class", func() error { return v.ValidateLoadBalancer(ctx, "kubernetes", service(18320, le.port)) }, ""},
		{"class with a floating network", withClass("public"), ""},
		{"class whose floating network is gone", withClass("gone"), `the floating network 00000000-0000-0000-0000-000000000000 (floating-network-id of [LoadBalancerClass "gone"]`},
		{"unknown class", withClass("private"), `names no [LoadBalancerClass "private"] section`},
		{"SCTP", sctp, "spec.ports[0].protocol: SCTP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if tc.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if !stratus.IsRejected(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v; want a rejection containing %s", err, tc.want)
			}
		})
	}

	gone := newProvider(t, cloudConf(le.mc, "[LoadBalancer]\nsubnet-id = 00000000-0000-0000-0000-000000000001\n"))
	glb, _ := gone.LoadBalancer()
	err := glb.(stratus.LoadBalancerValidator).ValidateLoadBalancer(ctx, "kubernetes", service(18320, le.port))
	if !stratus.IsRejected(err) || !strings.Contains(err.Error(), "the VIP subnet 00000000-0000-0000-0000-000000000001 (subnet-id of [LoadBalancer]) does not exist") {
		t.Errorf("missing subnet: %v; want a rejection naming subnet-id", err)
	}
	pages, err := loadbalancers.List(le.octavia(t), loadbalancers.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := loadbalancers.ExtractLoadBalancers(pages); len(all) != 0 {
		t.Errorf("dry runs left %d Octavia load balancers", len(all))
	}
}
