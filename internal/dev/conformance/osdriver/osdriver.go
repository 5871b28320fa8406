// Package osdriver is the conformance driver for OpenStack providers, on
// minicloud's OpenStack dialect (package minicloud/openstack): Nova servers
// are minicloud instances, so machines are made, stopped and deleted
// through minicloud's API (package mcdriver), and an Octavia load balancer
// is read from the minicloud load balancer it is projected onto. Traffic
// goes through minicloud's data plane and the cloud fails through its
// fault injection, which covers the dialect's requests too.
//
// Importing the package registers the provider "openstack"
// (providers/openstack) and the conformance drivers "openstack" (that
// provider, in process) and "openstack-upstream" (the upstream OpenStack
// provider, k8s.io/cloud-provider-openstack unchanged, served as a plugin by
// hack/kubebins' stratus-occm, `make kubebins-openstack`). Each always
// starts its own minicloud.
package osdriver

import (
	"context"
	"fmt"
	"slices"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	v1 "k8s.io/api/core/v1"

	"github.com/stratus-ccm/stratus/internal/dev/conformance/driverbase"
	"github.com/stratus-ccm/stratus/internal/dev/conformance/mcdriver"
	"github.com/stratus-ccm/stratus/minicloud"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
	"github.com/stratus-ccm/stratus/pkg/conformance"
	"github.com/stratus-ccm/stratus/providers/openstack"
)

// Names of the registered drivers.
const (
	Name         = "openstack"
	UpstreamName = "openstack-upstream"
)

func init() {
	driverbase.Simulated{
		Name:           Name,
		UpstreamName:   UpstreamName,
		Label:          "openstack driver",
		Starts:         "its own minicloud with the OpenStack dialect and writes the cloud.conf for it",
		Bin:            "stratus-occm",
		MakeTarget:     "kubebins-openstack",
		UpstreamTarget: "openstack upstream",
		Start:          Start,
	}.Register()
}

// Driver drives the OpenStack dialect of a minicloud.
type Driver struct {
	// Driver makes machines, checks traffic and breaks the cloud through
	// minicloud's own API.
	*mcdriver.Driver
	octavia *gophercloud.ServiceClient
}

var (
	_ conformance.LoadBalancerDriver = (*Driver)(nil)
	_ conformance.TrafficDriver      = (*Driver)(nil)
	_ conformance.FaultDriver        = (*Driver)(nil)
	_ conformance.RouteDriver        = (*Driver)(nil)
)

// Start runs a minicloud serving the OpenStack dialect in this process and
// returns the Target of the provider "openstack" for it, with a cloud.conf
// as an operator writes it: password credentials, the region, the VIP
// subnet, health monitors and the floating network for load balancers, and
// the router for routes.
// Target.Close stops the cloud.
func Start(ctx context.Context) (*conformance.Target, error) {
	mc, err := mcdriver.Start(ctx, func(srv *minicloud.Server) error {
		_, err := mos.Mount(srv, mos.Options{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("openstack driver: %w", err)
	}
	d, conf, err := connect(ctx, mc)
	if err != nil {
		mc.Close()
		return nil, fmt.Errorf("openstack driver: %w", err)
	}
	return &conformance.Target{Provider: openstack.ProviderName, CloudConfig: conf, Driver: d, Close: mc.Close}, nil
}

// connect authenticates to the dialect as an operator would, looks up the
// IDs a cloud.conf names and writes it.
func connect(ctx context.Context, mc *mcdriver.Cloud) (*Driver, []byte, error) {
	identity := mc.URL + mos.IdentityPrefix + "/v3"
	pc, err := gos.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: identity, Username: "conformance", Password: mc.Token,
		DomainName: mos.DomainName, TenantName: mos.ProjectName,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("authenticate to %s: %w", identity, err)
	}
	eo := gophercloud.EndpointOpts{Region: minicloud.Region}
	nc, err := gos.NewNetworkV2(pc, eo)
	if err != nil {
		return nil, nil, fmt.Errorf("network endpoint: %w", err)
	}
	lbc, err := gos.NewLoadBalancerV2(pc, eo)
	if err != nil {
		return nil, nil, fmt.Errorf("load-balancer endpoint: %w", err)
	}
	pages, err := subnets.List(nc, subnets.ListOpts{Name: "vips"}).AllPages(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list subnets: %w", err)
	}
	subs, err := subnets.ExtractSubnets(pages)
	if err != nil || len(subs) != 1 {
		return nil, nil, fmt.Errorf("subnet vips: %d found (%v)", len(subs), err)
	}
	conf := fmt.Appendf(nil, `[Global]
auth-url = %s
username = conformance
password = %s
user-domain-name = %s
tenant-name = %s
tenant-domain-name = %s
region = %s

[LoadBalancer]
subnet-id = %s
create-monitor = true
`, identity, mc.Token, mos.DomainName, mos.ProjectName, mos.DomainName, minicloud.Region, subs[0].ID)
	{
		pages, err := routers.List(nc, routers.ListOpts{Name: "minicloud"}).AllPages(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("list routers: %w", err)
		}
		rs, err := routers.ExtractRouters(pages)
		if err != nil || len(rs) != 1 {
			return nil, nil, fmt.Errorf("router minicloud: %d found (%v)", len(rs), err)
		}
		// The upstream provider finds the external network for floating
		// IPs itself; naming it keeps the load balancers' ingress the
		// floating IP whatever it finds.
		pages, err = networks.List(nc, networks.ListOpts{Name: "public"}).AllPages(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("list networks: %w", err)
		}
		nets, err := networks.ExtractNetworks(pages)
		if err != nil || len(nets) != 1 {
			return nil, nil, fmt.Errorf("network public: %d found (%v)", len(nets), err)
		}
		conf = fmt.Appendf(conf, "floating-network-id = %s\n\n[Route]\nrouter-id = %s\n", nets[0].ID, rs[0].ID)
	}
	return &Driver{Driver: mc.Driver, octavia: lbc}, conf, nil
}

// CreateMachine creates a running instance (a Nova server) named name, as
// mcdriver does, and expects what docs/openstack.md says the provider
// reports for it: provider ID openstack:///<server ID>, the fixed
// addresses of network "minicloud" as InternalIP (IPv4, then IPv6), then
// its floating address as ExternalIP; the flavor, the availability zone
// and the region of the cloud.conf.
func (d *Driver) CreateMachine(ctx context.Context, name string) (*conformance.Machine, error) {
	m, err := d.Driver.CreateMachine(ctx, name)
	if err != nil {
		return nil, err
	}
	id, err := d.InstanceID(m)
	if err != nil {
		return nil, err
	}
	m.Want.ProviderID = "openstack:///" + id
	m.Want.NodeAddresses = slices.DeleteFunc(m.Want.NodeAddresses, func(a v1.NodeAddress) bool { return a.Type == v1.NodeHostName })
	m.Want.Region = minicloud.Region
	return m, nil
}

// DescribeLoadBalancer reads the Octavia load balancer named name from the
// minicloud load balancer it is projected onto.
func (d *Driver) DescribeLoadBalancer(ctx context.Context, name string) (*conformance.LoadBalancer, error) {
	pages, err := loadbalancers.List(d.octavia, loadbalancers.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list Octavia load balancers named %s: %w", name, err)
	}
	lbs, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		return nil, fmt.Errorf("list Octavia load balancers named %s: %w", name, err)
	}
	switch len(lbs) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("%d Octavia load balancers are named %s", len(lbs), name)
	}
	lb, err := d.Driver.DescribeLoadBalancer(ctx, "octavia-"+lbs[0].ID)
	if err != nil {
		return nil, fmt.Errorf("describe Octavia load balancer %s (%s): %w", name, lbs[0].ID, err)
	}
	// nil when only the Octavia record is left (PENDING_DELETE): the cloud
	// serves nothing for it.
	return lb, nil
}

// Unsupported lists what docs/openstack.md says the provider rejects: a
// port protocol other than TCP and UDP.
func (d *Driver) Unsupported() []conformance.Unsupported {
	return []conformance.Unsupported{
		{Field: "spec.ports[0].protocol", Apply: func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }},
	}
}

// DualStack is false: the dialect's extra routes are checked for IPv4.
func (d *Driver) DualStack() bool { return false }
