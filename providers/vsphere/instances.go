package vsphere

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/pkg/stratus"
	"github.com/stratus-ccm/stratus/pkg/stratus/instanceindex"
)

var (
	_ cloudprovider.Interface   = (*Cloud)(nil)
	_ cloudprovider.InstancesV2 = (*Cloud)(nil)
	_ cloudprovider.Zones       = (*Cloud)(nil)
	_ stratus.InstanceWatcher   = (*Cloud)(nil)
)

// ListInstances lists the VMs of every vCenter (templates left out). With
// a synced watch it answers from memory; otherwise it retrieves all VMs in
// one paged call per vCenter. Any vCenter failing is an error, never a
// shorter list. A VM whose guest reports no usable IP address, or whose
// zone cannot be read, is listed with MetadataErr saying why.
func (c *Cloud) ListInstances(ctx context.Context) ([]stratus.Instance, error) {
	var out []stratus.Instance
	for _, v := range c.vcs {
		vms, err := v.inv.list(ctx)
		if err != nil {
			return nil, err
		}
		var hosts []types.ManagedObjectReference
		for _, r := range vms {
			if r.listed() && r.host.Value != "" {
				hosts = append(hosts, r.host)
			}
		}
		zones, zerr := v.zones.zonesOf(ctx, hosts)
		for _, r := range vms {
			if !r.listed() {
				continue
			}
			var zd zoneData
			var err error
			if c.cfg.Labels.Enabled() {
				var ok bool
				if zd, ok = zones[r.host]; !ok && zerr != nil {
					err = fmt.Errorf("zone and region of VM %s: %w", r.name, zerr)
				}
			}
			out = append(out, c.instance(v, r, zd, err))
		}
	}
	return out, nil
}

// instance is the listing's entry for r.
func (c *Cloud) instance(v *vcenter, r *vm, zd zoneData, zoneErr error) stratus.Instance {
	inst := stratus.Instance{
		Name:        r.name,
		Shutdown:    r.powerState != types.VirtualMachinePowerStatePoweredOn,
		SystemUUIDs: r.systemUUIDs(),
		Metadata: cloudprovider.InstanceMetadata{
			ProviderID:   r.providerID(),
			InstanceType: r.instanceType(),
			Zone:         zd.zone,
			Region:       zd.region,
		},
	}
	if r.hostName != "" {
		inst.Hostnames = []string{r.hostName}
	}
	addrs, err := r.addresses(&c.cfg.Nodes, v.cfg.IPFamilies)
	inst.Metadata.NodeAddresses = addrs
	switch {
	case err != nil:
		inst.MetadataErr = err
	case zoneErr != nil:
		inst.MetadataErr = zoneErr
	}
	return inst
}

// find returns the node's instance from a listing made now: by provider
// ID (its UUID compared case-insensitively), else by VM name, guest host
// name or system UUID in either byte order. nil means the successful
// listing lacks it.
func (c *Cloud) find(ctx context.Context, node *v1.Node) (*stratus.Instance, error) {
	list, err := c.ListInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	n := node
	if node.Spec.ProviderID != "" {
		uuid, err := uuidFromProviderID(node.Spec.ProviderID)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node.Name, err)
		}
		n = node.DeepCopy()
		n.Spec.ProviderID = providerIDPrefix + uuid
		if inst := instanceindex.New(list).Find(n); inst != nil {
			return inst, nil
		}
		// Upstream also accepts the provider ID's UUID in the other byte
		// order.
		n.Spec.ProviderID = providerIDPrefix + swapUUID(uuid)
	}
	if inst := instanceindex.New(list).Find(n); inst != nil {
		return inst, nil
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("node %s: %w", node.Name, errEmptyListing)
	}
	return nil, nil
}

// errEmptyListing refuses to call a node's VM gone when vCenter lists no
// VMs at all (a wrong datacenter, missing permissions).
var errEmptyListing = errors.New("vCenter lists no VMs; not treating the node's VM as gone")

// InstanceExists reports whether the node's VM exists; a powered-off VM
// exists. false comes only from a successful, non-empty listing.
func (c *Cloud) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	inst, err := c.find(ctx, node)
	return inst != nil, err
}

// InstanceShutdown reports whether the node's VM is not powered on
// (powered off or suspended), as upstream. A missing VM is not shut down.
func (c *Cloud) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	inst, err := c.find(ctx, node)
	return inst != nil && inst.Shutdown, err
}

// InstanceMetadata returns the node's VM's provider ID, instance type,
// addresses, zone and region. A VM without usable IP addresses is an error
// saying so (the node stays uninitialized), as is a missing VM
// (cloudprovider.InstanceNotFound).
func (c *Cloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, err := c.find(ctx, node)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		return nil, fmt.Errorf("node %s: no VM with its provider ID, name, host name or system UUID: %w", node.Name, cloudprovider.InstanceNotFound)
	}
	if inst.MetadataErr != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, inst.MetadataErr)
	}
	md := inst.Metadata
	return &md, nil
}

// productUUIDPath is where the BIOS UUID of the machine the manager runs on
// is read by GetZone.
var productUUIDPath = "/sys/class/dmi/id/product_uuid"

// GetZone returns the zone of the VM the manager runs on, found by its
// BIOS UUID.
func (c *Cloud) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	b, err := os.ReadFile(productUUIDPath)
	if err != nil {
		return cloudprovider.Zone{}, fmt.Errorf("zone of this machine: %w", err)
	}
	node := &v1.Node{Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: strings.TrimSpace(string(b))}}}
	return c.zoneOf(ctx, node)
}

// GetZoneByProviderID returns the zone of the VM with providerID.
func (c *Cloud) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	return c.zoneOf(ctx, &v1.Node{Spec: v1.NodeSpec{ProviderID: providerID}})
}

// GetZoneByNodeName returns the zone of the VM named like the node (or
// with it as guest host name).
func (c *Cloud) GetZoneByNodeName(ctx context.Context, nodeName k8stypes.NodeName) (cloudprovider.Zone, error) {
	return c.zoneOf(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(nodeName)}})
}

func (c *Cloud) zoneOf(ctx context.Context, node *v1.Node) (cloudprovider.Zone, error) {
	inst, err := c.find(ctx, node)
	if err != nil {
		return cloudprovider.Zone{}, err
	}
	if inst == nil {
		return cloudprovider.Zone{}, fmt.Errorf("zone of %s: %w", describe(node), cloudprovider.InstanceNotFound)
	}
	var noAddrs *errNoAddresses
	if inst.MetadataErr != nil && !errors.As(inst.MetadataErr, &noAddrs) {
		return cloudprovider.Zone{}, inst.MetadataErr
	}
	return cloudprovider.Zone{FailureDomain: inst.Metadata.Zone, Region: inst.Metadata.Region}, nil
}

func describe(node *v1.Node) string {
	switch {
	case node.Spec.ProviderID != "":
		return "provider ID " + node.Spec.ProviderID
	case node.Name != "":
		return "node " + node.Name
	default:
		return "system UUID " + node.Status.NodeInfo.SystemUUID
	}
}
