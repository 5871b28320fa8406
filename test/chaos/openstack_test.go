package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

// OpenStack fault kinds, beyond minicloud's (which the dialect's operations
// suffer as the native ones do).
const (
	faultKeystoneRejects = "Keystone rejects every token and token request (401)"
	faultTokenIssueFails = "Keystone token requests fail (500)"
)

// openstackShort is the OpenStack run under `go test`: a few nodes and
// Services, every fault kind (minicloud's six and Keystone's two) once.
var openstackShort = size{nodes: 4, services: 4, replicas: 2, window: 30 * time.Second, churnEvery: time.Second,
	faultStep: 3 * time.Second, killEvery: 20 * time.Second, partitionFor: 8 * time.Second,
	converge: 3 * time.Minute, trafficSample: 4}

// Operations and names of the OpenStack dialect.
const (
	novaListing  = "GET /compute/v2.1/servers/detail"
	tokenRequest = "POST /identity/v3/auth/tokens"
	// octaviaTag is the tag of the minicloud load balancer onto which the
	// dialect projects an Octavia load balancer (its value the Octavia ID).
	octaviaTag = "openstack-loadbalancer"
	// uidTag is the tag the OpenStack provider gives a Service's load
	// balancer: its UID.
	uidTag = "kube_service_uid="
)

// openstackTokenTTL is the dialect's token lifetime in this run: short, so
// that the managers' tokens expire during the window and have to be
// requested again, also while token requests fail.
const openstackTokenTTL = 15 * time.Second

// TestChaosOpenStack is the chaos run with stratus's native OpenStack
// provider (providers/openstack) against minicloud's OpenStack dialect:
// Nova servers are the minicloud instances the churn drives, each
// LoadBalancer Service must have exactly one Octavia load balancer whose
// floating IP is its ingress (and carries its traffic), the routes are the
// router's extra routes. Besides minicloud's faults (on the dialect's
// operations, Nova's listing emptied or failed), Keystone rejects every
// token and every token request for a step, and token requests fail for
// another while tokens expire every 15 s.
func TestChaosOpenStack(t *testing.T) {
	var lbc, nc *gophercloud.ServiceClient
	p := &provider{
		name:      "openstack (providers/openstack, minicloud's OpenStack dialect)",
		block:     253,
		short:     openstackShort,
		cloudArgs: []string{"--openstack=true", "--openstack-token-ttl=" + openstackTokenTTL.String()},
		setup: func(t *testing.T, c *chaosCloud) []string {
			ctx := context.Background()
			direct := devenv.OpenStackIdentityURL(c.cloud.url)
			topo, err := devenv.LookupOpenStack(ctx, direct, c.token)
			if err != nil {
				t.Fatal(err)
			}
			// The test's own clients go to minicloud directly, the managers
			// through the front.
			pc, err := gos.AuthenticatedClient(ctx, gophercloud.AuthOptions{
				IdentityEndpoint: direct, Username: "chaos-audit", Password: c.token,
				DomainName: openstack.DomainName, TenantName: openstack.ProjectName, AllowReauth: true,
			})
			if err != nil {
				t.Fatalf("authenticate to the OpenStack dialect: %v", err)
			}
			eo := gophercloud.EndpointOpts{Region: minicloud.Region}
			if lbc, err = gos.NewLoadBalancerV2(pc, eo); err != nil {
				t.Fatal(err)
			}
			if nc, err = gos.NewNetworkV2(pc, eo); err != nil {
				t.Fatal(err)
			}
			// No health monitors (create-monitor): minicloud projects one
			// health check per load balancer, and a two-port Cluster
			// Service's TCP monitors (one per node port) differ, which it
			// refuses.
			// Each replica's Keystone is at its own front address (so is
			// the catalog's every endpoint: minicloud builds it from the
			// address the token request reached).
			return perReplica(c, func(i int) string {
				conf := string(devenv.OpenStackCloudConf(devenv.OpenStackIdentityURL(c.front.urls[i]), "stratus-chaos", c.token, topo))
				return `- name: openstack
  type: openstack
  cloudConfigFile: ` + writeFile(t, c.dir, fmt.Sprintf("cloud-%d.conf", i+1), conf) + `
  instanceCacheFreshness: 5s
`
			})
		},
		machines:      onMinicloud,
		providerID:    func(id string) string { return devenv.OpenStackProviderIDPrefix + id },
		noHealthCheck: true,
		listing: listingRule{
			op: novaListing,
			matches: func(req *http.Request) bool {
				q := req.URL.Query()
				return req.Method == http.MethodGet && req.URL.Path == "/compute/v2.1/servers/detail" &&
					!q.Has("name") && !q.Has("ip") && !q.Has("ip6") && !q.Has("marker")
			},
			empty: []byte(`{"servers":[]}`),
		},
		loadBalancers: func(ctx context.Context, c *chaosCloud) ([]serviceLB, error) {
			return octaviaLoadBalancers(ctx, c, lbc, nc)
		},
		routes: func(ctx context.Context, c *chaosCloud) ([]api.Route, error) {
			// The router's extra routes are the cloud's routes; the run's
			// minicloud serves this cluster only.
			return c.cl.ListRoutes(ctx, client.ListOptions{})
		},
		faults: []providerFault{
			{kind: faultKeystoneRejects, apply: func(context.Context, *faultDriver) api.Faults {
				return api.Faults{UnauthorizedRate: 1}
			}},
			{kind: faultTokenIssueFails, apply: func(context.Context, *faultDriver) api.Faults {
				return api.Faults{ErrorRate: 1, Operations: []string{tokenRequest}}
			}},
		},
	}
	runChaos(t, p)
}

// octaviaLoadBalancers lists the Octavia load balancers with, for each, the
// Service UID of its tag, its floating IP (the ingress the provider must
// report) and the minicloud load balancer the dialect projects it onto
// (what carries the traffic, with the listeners, targets, source ranges and
// health check the audit compares).
func octaviaLoadBalancers(ctx context.Context, c *chaosCloud, lbc, nc *gophercloud.ServiceClient) ([]serviceLB, error) {
	pages, err := loadbalancers.List(lbc, loadbalancers.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("octavia: %w", err)
	}
	olbs, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		return nil, fmt.Errorf("octavia: %w", err)
	}
	pages, err = floatingips.List(nc, floatingips.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("neutron floating IPs: %w", err)
	}
	fips, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil {
		return nil, fmt.Errorf("neutron floating IPs: %w", err)
	}
	fipOf := map[string][]string{}
	for _, f := range fips {
		if f.PortID != "" {
			fipOf[f.PortID] = append(fipOf[f.PortID], f.FloatingIP)
		}
	}
	native, err := c.cl.ListLoadBalancers(ctx, client.ListOptions{})
	if err != nil {
		return nil, err
	}
	nativeOf := map[string]api.LoadBalancer{}
	for _, lb := range native {
		if id := lb.Tags[octaviaTag]; id != "" {
			nativeOf[id] = lb
		}
	}
	out := make([]serviceLB, 0, len(olbs))
	vipPorts := map[string]bool{}
	for _, o := range olbs {
		vipPorts[o.VipPortID] = true
	}
	// A floating IP the provider made that is not on a load balancer's VIP
	// port is leaked: listed with no Service UID, the audit counts it so.
	for _, f := range fips {
		if strings.HasPrefix(f.Description, "Floating IP for ") && !vipPorts[f.PortID] {
			out = append(out, serviceLB{name: f.Description, lb: api.LoadBalancer{ID: "floating IP " + f.FloatingIP, Name: f.Description}})
		}
	}
	for _, o := range olbs {
		s := serviceLB{name: o.Name}
		for _, tag := range o.Tags {
			if uid, ok := strings.CutPrefix(tag, uidTag); ok {
				s.uid = uid
			}
		}
		switch ips := fipOf[o.VipPortID]; len(ips) {
		case 1:
			s.ingress = ips[0]
		default:
			s.ingress = fmt.Sprintf("(%d floating IPs: %v)", len(ips), ips)
		}
		lb, ok := nativeOf[o.ID]
		if !ok {
			lb = api.LoadBalancer{ID: o.ID, Name: o.Name, State: "no minicloud load balancer projected"}
		}
		lb.ID = o.ID + " (" + lb.ID + ")"
		if o.ProvisioningStatus != "ACTIVE" {
			lb.State = "octavia " + o.ProvisioningStatus
		}
		s.lb = lb
		out = append(out, s)
	}
	return out, nil
}
