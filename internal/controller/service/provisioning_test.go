package service

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// While load balancers provision, a provider that lists them is asked once
// per listing for all waiting Services, not once per Service per retry: each
// Service gets exactly one EnsureLoadBalancer, and its status comes from the
// listing. A Service changed while its load balancer provisions is ensured
// again with the change.
func TestProvisioningWatchedByListing(t *testing.T) {
	c := newTestCloud()
	c.provisioning, c.retryAfter = 1500*time.Millisecond, 200*time.Millisecond
	clouds := cloud.Single(cloud.NewProvider("fake", listingCloud{c}))
	h := start(t, c, clouds, Options{})
	h.createNodes(0, 2)
	const n = 5
	var svcs []*v1.Service
	for i := range n {
		svcs = append(svcs, h.createService(lbService(fmt.Sprintf("p%d", i))))
	}
	// Change p0 while it provisions: its next sync must call Ensure again.
	h.waitEvent("p0", EventProvisioning)
	h.updateService("p0", func(s *v1.Service) { s.Spec.Ports[0].Port = 8443 })

	for i := range n {
		h.waitIngress(svcs[i].Name, 30*time.Second)
		h.waitCondition(svcs[i].Name, ReasonReady, 10*time.Second)
		wantPort := int32(80)
		if i == 0 {
			wantPort = 8443
		}
		// p0's first load balancer (port 80) may become active before
		// the controller sees the change; its status must then follow
		// the re-ensure.
		h.eventually(30*time.Second, fmt.Sprintf("ingress port %d of %s from the listing's status", wantPort, svcs[i].Name), func() (bool, error) {
			ing := h.getService(svcs[i].Name).Status.LoadBalancer.Ingress
			return len(ing) > 0 && len(ing[0].Ports) == 1 && ing[0].Ports[0].Port == wantPort, nil
		})
		h.waitEvent(svcs[i].Name, "EnsuredLoadBalancer")
	}
	c.set(func(c *testCloud) {
		for i, svc := range svcs {
			got := len(c.ensureTimes[cloudprovider.DefaultLoadBalancerName(svc)])
			switch {
			case i == 0 && got < 2:
				t.Errorf("%s (changed while provisioning): %d Ensure calls, want at least 2", svc.Name, got)
			case i > 0 && got != 1:
				t.Errorf("%s: %d Ensure calls, want exactly 1 (the listing tells when provisioning ends)", svc.Name, got)
			}
		}
		// 1.5 s of provisioning at one listing per second at most, plus the
		// drift check's; far fewer than one per Service per 200 ms retry.
		if c.calls["list"] < 1 || c.calls["list"] > 6 {
			t.Errorf("%d listings, want between 1 and 6", c.calls["list"])
		}
	})
}
