package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

// OpenStackProviderIDPrefix starts the provider IDs the OpenStack provider
// (native or upstream) gives the nodes: openstack:///<server ID>, and a
// Nova server is a minicloud instance.
const OpenStackProviderIDPrefix = "openstack:///"

// OpenStackTopology holds the IDs a cloud.conf for minicloud's OpenStack
// dialect names: the VIP subnet (Neutron subnet "vips"), the external
// network of the floating IPs ("public") and the router whose extra routes
// carry the pod CIDRs ("minicloud").
type OpenStackTopology struct {
	VIPSubnetID     string
	PublicNetworkID string
	RouterID        string
}

// OpenStackIdentityURL is the Keystone v3 URL of the dialect served by the
// minicloud at cloudURL.
func OpenStackIdentityURL(cloudURL string) string {
	return cloudURL + openstack.IdentityPrefix + "/v3"
}

// LookupOpenStack finds the topology of the dialect at identityURL as an
// operator would, through Keystone and Neutron, authenticated by a minicloud
// token (the dialect's password).
func LookupOpenStack(ctx context.Context, identityURL, token string) (OpenStackTopology, error) {
	pc, err := gos.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: identityURL, Username: "stratus-dev", Password: token,
		DomainName: openstack.DomainName, TenantName: openstack.ProjectName,
	})
	if err != nil {
		return OpenStackTopology{}, fmt.Errorf("authenticate to the OpenStack dialect at %s: %w", identityURL, err)
	}
	nc, err := gos.NewNetworkV2(pc, gophercloud.EndpointOpts{Region: minicloud.Region})
	if err != nil {
		return OpenStackTopology{}, fmt.Errorf("the OpenStack dialect's network endpoint: %w", err)
	}
	pages, err := subnets.List(nc, subnets.ListOpts{Name: "vips"}).AllPages(ctx)
	if err != nil {
		return OpenStackTopology{}, fmt.Errorf("list subnet vips: %w", err)
	}
	subs, err := subnets.ExtractSubnets(pages)
	if err != nil || len(subs) != 1 {
		return OpenStackTopology{}, fmt.Errorf("subnet vips: %d found (%v), want 1", len(subs), err)
	}
	pages, err = networks.List(nc, networks.ListOpts{Name: "public"}).AllPages(ctx)
	if err != nil {
		return OpenStackTopology{}, fmt.Errorf("list network public: %w", err)
	}
	nets, err := networks.ExtractNetworks(pages)
	if err != nil || len(nets) != 1 {
		return OpenStackTopology{}, fmt.Errorf("network public: %d found (%v), want 1", len(nets), err)
	}
	pages, err = routers.List(nc, routers.ListOpts{Name: "minicloud"}).AllPages(ctx)
	if err != nil {
		return OpenStackTopology{}, fmt.Errorf("list router minicloud: %w", err)
	}
	rs, err := routers.ExtractRouters(pages)
	if err != nil || len(rs) != 1 {
		return OpenStackTopology{}, fmt.Errorf("router minicloud: %d found (%v), want 1", len(rs), err)
	}
	return OpenStackTopology{VIPSubnetID: subs[0].ID, PublicNetworkID: nets[0].ID, RouterID: rs[0].ID}, nil
}

// OpenStackCloudConf is a cloud.conf (the upstream OpenStack CCM's INI
// format, which the native provider reads too) for the dialect: password
// authentication as user in project minicloud, load balancers on the VIP
// subnet, each with a floating IP of the public network, and with t.RouterID
// routes as the router's extra routes ([Route] router-id).
func OpenStackCloudConf(identityURL, user, password string, t OpenStackTopology) []byte {
	conf := fmt.Appendf(nil, `[Global]
auth-url = %s
username = %s
password = %s
user-domain-name = %s
tenant-name = %s
tenant-domain-name = %s
region = %s

[LoadBalancer]
subnet-id = %s
floating-network-id = %s
`, identityURL, user, password, openstack.DomainName, openstack.ProjectName, openstack.DomainName, minicloud.Region,
		t.VIPSubnetID, t.PublicNetworkID)
	if t.RouterID != "" {
		conf = fmt.Appendf(conf, "\n[Route]\nrouter-id = %s\n", t.RouterID)
	}
	return conf
}

func (e *env) openstack() bool { return e.opts.Cloud == CloudOpenStack }

// openstackConfigPath is the OpenStack provider's cloud.conf.
func (e *env) openstackConfigPath() string { return filepath.Join(e.opts.StateDir, "cloud.conf") }

// writeOpenStackConfig writes <state-dir>/cloud.conf for the dialect of
// the running minicloud, its IDs looked up through the dialect.
func (e *env) writeOpenStackConfig(ctx context.Context) error {
	identity := OpenStackIdentityURL(e.cloud.url)
	topo, err := LookupOpenStack(ctx, identity, e.cloud.token)
	if err != nil {
		return err
	}
	// The password is the minicloud token: owner only.
	if err := os.WriteFile(e.openstackConfigPath(), OpenStackCloudConf(identity, "stratus-dev", e.cloud.token, topo), 0o600); err != nil {
		return fmt.Errorf("write the OpenStack cloud.conf: %w", err)
	}
	return nil
}

// mountOpenStack serves the OpenStack dialect on a minicloud server (each
// start of the cloud makes a new server: Keystone tokens live in memory, so
// clients authenticate again after a restart, as after a token's expiry).
func mountOpenStack(srv *minicloud.Server) error {
	if _, err := openstack.Mount(srv, openstack.Options{}); err != nil {
		return fmt.Errorf("minicloud: %w", err)
	}
	return nil
}
