package openstack

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// listPageSize is the limit of each page of the server listing (Nova's
// default maximum).
const listPageSize = 1000

// server is the part of a Nova server the provider reads.
type server struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Status           string `json:"status"`
	AvailabilityZone string `json:"OS-EXT-AZ:availability_zone"`
	Flavor           struct {
		ID           string `json:"id"`
		OriginalName string `json:"original_name"`
	} `json:"flavor"`
	Addresses  map[string][]serverAddress `json:"addresses"`
	AccessIPv4 string                     `json:"accessIPv4"`
	AccessIPv6 string                     `json:"accessIPv6"`
}

type serverAddress struct {
	Addr    string `json:"addr"`
	Version int    `json:"version"`
	Type    string `json:"OS-EXT-IPS:type"`
}

// ProviderID returns the provider ID of a server, as upstream writes it
// (without a region).
func ProviderID(serverID string) string { return ProviderName + ":///" + serverID }

// serverID reads a provider ID: openstack:///<id>, or
// openstack://<region>/<id> as upstream writes it with OS_CCM_REGIONAL.
func serverID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderName+"://")
	if !ok {
		return "", fmt.Errorf("provider ID %q: want %s:///<server id>", providerID, ProviderName)
	}
	_, id, ok := strings.Cut(rest, "/")
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", fmt.Errorf("provider ID %q: want %s:///<server id> or %s://<region>/<server id>", providerID, ProviderName, ProviderName)
	}
	return id, nil
}

// ListInstances lists every server in one paged GET /servers/detail. Any
// failed page fails the listing.
func (c *Cloud) ListInstances(ctx context.Context) ([]stratus.Instance, error) {
	all, err := c.listServers(ctx, listAll())
	if err != nil {
		return nil, err
	}
	out := make([]stratus.Instance, 0, len(all))
	for i := range all {
		out = append(out, c.instance(&all[i]))
	}
	return out, nil
}

// listAll lists every server in pages of listPageSize.
func listAll() servers.ListOpts { return servers.ListOpts{Limit: listPageSize} }

func (c *Cloud) listServers(ctx context.Context, opts servers.ListOpts) ([]server, error) {
	sc, err := c.computeClient(ctx)
	if err != nil {
		return nil, err
	}
	pages, err := servers.List(sc, opts).AllPages(ctx)
	if err != nil {
		return nil, classify("list servers", err)
	}
	var all []server
	if err := servers.ExtractServersInto(pages, &all); err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	return all, nil
}

// instance is the listing's view of a server.
func (c *Cloud) instance(s *server) stratus.Instance {
	return stratus.Instance{
		Name: s.Name,
		Metadata: cloudprovider.InstanceMetadata{
			ProviderID:    ProviderID(s.ID),
			InstanceType:  s.Flavor.OriginalName,
			NodeAddresses: c.addresses(s),
			Zone:          s.AvailabilityZone,
			Region:        c.cfg.Region,
		},
		Shutdown: s.Status == "SHUTOFF",
	}
}

// addresses are a server's node addresses: fixed addresses are InternalIP
// (ExternalIP on a [Networking] public-network-name; only those of an
// internal-network-name when any is set), floating ones and accessIPv4/6
// ExternalIP. Networks are taken in name order, so that the result does
// not depend on JSON map order.
func (c *Cloud) addresses(s *server) []v1.NodeAddress {
	var out []v1.NodeAddress
	add := func(t v1.NodeAddressType, ip string) {
		if ip == "" || c.cfg.IPv6Disabled && strings.Contains(ip, ":") {
			return
		}
		a := v1.NodeAddress{Type: t, Address: ip}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	nets := make([]string, 0, len(s.Addresses))
	for n := range s.Addresses {
		nets = append(nets, n)
	}
	slices.Sort(nets)
	for _, n := range nets {
		public := slices.Contains(c.cfg.PublicNetworks, n)
		internal := len(c.cfg.InternalNetworks) == 0 || slices.Contains(c.cfg.InternalNetworks, n)
		for _, a := range s.Addresses[n] {
			switch {
			case a.Type == "floating" || public:
				add(v1.NodeExternalIP, a.Addr)
			case internal:
				add(v1.NodeInternalIP, a.Addr)
			}
		}
	}
	add(v1.NodeExternalIP, s.AccessIPv4)
	add(v1.NodeExternalIP, s.AccessIPv6)
	return out
}

// errNoServer says a lookup found no server (a successful answer).
var errNoServer = errors.New("no such server")

// find returns the node's server: by provider ID (GET /servers/{id}),
// else by name (GET /servers/detail?name=^name$). errNoServer (wrapped)
// only when the cloud answered that there is none.
func (c *Cloud) find(ctx context.Context, node *v1.Node) (*server, error) {
	if node.Spec.ProviderID != "" {
		id, err := serverID(node.Spec.ProviderID)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node.Name, err)
		}
		sc, err := c.computeClient(ctx)
		if err != nil {
			return nil, err
		}
		var s server
		err = servers.Get(ctx, sc, id).ExtractInto(&s)
		switch {
		case isNotFound(err):
			return nil, fmt.Errorf("node %s: server %s: %w", node.Name, id, errNoServer)
		case err != nil:
			return nil, classify(fmt.Sprintf("get server %s of node %s", id, node.Name), err)
		}
		return &s, nil
	}
	all, err := c.listServers(ctx, servers.ListOpts{Name: "^" + regexp.QuoteMeta(node.Name) + "$"})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	// Nova's name filter is a regular expression that its database may
	// match loosely; keep exact names only.
	all = slices.DeleteFunc(all, func(s server) bool { return s.Name != node.Name })
	switch len(all) {
	case 0:
		return nil, fmt.Errorf("node %s: no server named %s: %w", node.Name, node.Name, errNoServer)
	case 1:
		return &all[0], nil
	}
	return nil, fmt.Errorf("node %s: %d servers are named %s; set the node's spec.providerID", node.Name, len(all), node.Name)
}

// InstanceExists reports whether the node's server exists; false only
// when Nova answered that it does not.
func (c *Cloud) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	_, err := c.find(ctx, node)
	if errors.Is(err, errNoServer) {
		return false, nil
	}
	return err == nil, err
}

// InstanceShutdown reports whether the node's server is SHUTOFF.
func (c *Cloud) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	s, err := c.find(ctx, node)
	if errors.Is(err, errNoServer) {
		// A server that is gone is not shut down: InstanceExists answers
		// for it (docs/providers.md).
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.Status == "SHUTOFF", nil
}

// InstanceMetadata returns the node's provider ID, flavor, addresses, zone
// and region.
func (c *Cloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	s, err := c.find(ctx, node)
	if errors.Is(err, errNoServer) {
		return nil, fmt.Errorf("%w: %w", cloudprovider.InstanceNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	m := c.instance(s).Metadata
	return &m, nil
}
