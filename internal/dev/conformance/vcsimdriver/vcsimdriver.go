// Package vcsimdriver is the conformance driver for the vSphere provider
// (providers/vsphere) on the simulated vCenter of vcsim: machines
// are VMs created, powered off and on, and destroyed in the simulator, and
// the cloud fails by taking the simulator down (connections refused). The
// vSphere provider has no LoadBalancer and no Routes, so those scenarios
// are skipped with the reason.
//
// Importing the package registers the provider "vsphere" and the
// conformance drivers "vcsim" (stratus's provider, in process) and
// "vcsim-upstream" (the upstream vSphere provider, k8s.io/cloud-provider-vsphere
// unchanged, served as a plugin by hack/kubebins' stratus-cpv, `make
// kubebins-vsphere`). Each always starts its own simulator.
package vcsimdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/internal/dev/conformance/driverbase"
	"github.com/stratus-ccm/stratus/pkg/conformance"
	_ "github.com/stratus-ccm/stratus/providers/vsphere" // registers "vsphere"
	"github.com/stratus-ccm/stratus/vcsim"
)

// Names of the registered drivers.
const (
	Name         = "vcsim"
	UpstreamName = "vcsim-upstream"
)

// Provider is the name the vSphere provider registers.
const Provider = "vsphere"

func init() {
	driverbase.Simulated{
		Name:           Name,
		UpstreamName:   UpstreamName,
		Label:          "vcsim driver",
		Starts:         "its own simulated vCenter and writes the cloud config for it",
		Bin:            "stratus-cpv",
		MakeTarget:     "kubebins-vsphere",
		UpstreamTarget: "vsphere upstream",
		Start:          Start,
	}.Register()
}

// Driver drives a simulated vCenter.
type Driver struct {
	srv *vcsim.Server
}

var _ conformance.FaultDriver = (*Driver)(nil)

// Start runs a simulated vCenter and returns its Target (the vSphere
// provider with a cloud config for it); Target.Close stops it. The
// simulator has one VM of its own, "resident-0", that the kit never
// touches: the vSphere provider answers nothing from a vCenter that lists
// no VM at all (an empty inventory looks like an outage), and a real
// vCenter always has other VMs.
func Start(ctx context.Context) (*conformance.Target, error) {
	srv, err := vcsim.Start(ctx, vcsim.Options{VMs: 1, NamePattern: "resident-%d"})
	if err != nil {
		return nil, fmt.Errorf("vcsim driver: %w", err)
	}
	return &conformance.Target{
		Provider:    Provider,
		CloudConfig: srv.CloudConfig(vcsim.TrustCAFile),
		Driver:      &Driver{srv: srv},
		Close:       srv.Close,
	}, nil
}

// CreateMachine creates a powered-on VM named name, in the zones
// round-robin, whose guest reports its name and one IPv4 address.
func (d *Driver) CreateMachine(ctx context.Context, name string) (*conformance.Machine, error) {
	vm, err := d.srv.Create(ctx, vcsim.VMSpec{Name: name})
	if err != nil {
		return nil, err
	}
	var ip string
	if len(vm.Guest.NICs) > 0 && len(vm.Guest.NICs[0].IPs) > 0 {
		ip = vm.Guest.NICs[0].IPs[0]
	}
	node := &v1.Node{}
	node.Name = name
	// A kubelet reports the BIOS UUID from the firmware, upper case.
	node.Status.NodeInfo.SystemUUID = strings.ToUpper(vm.UUID)
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeHostName, Address: name}}
	return &conformance.Machine{
		Node: node,
		// docs/vsphere.md: the host name, then the first IP as both
		// InternalIP and ExternalIP without nodes: rules. The instance
		// type names the guest OS as the provider maps it, which the
		// simulator does not say, so it is not checked.
		Want: cloudprovider.InstanceMetadata{
			ProviderID: "vsphere://" + vm.UUID,
			NodeAddresses: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: vm.Guest.Hostname},
				{Type: v1.NodeInternalIP, Address: ip},
				{Type: v1.NodeExternalIP, Address: ip},
			},
			Zone: vm.Zone, Region: vm.Region,
		},
	}, nil
}

// StopMachine powers the VM off.
func (d *Driver) StopMachine(ctx context.Context, m *conformance.Machine) error {
	return d.srv.PowerOff(ctx, m.Node.Name)
}

// StartMachine powers the VM on.
func (d *Driver) StartMachine(ctx context.Context, m *conformance.Machine) error {
	return d.srv.PowerOn(ctx, m.Node.Name)
}

// DeleteMachine destroys the VM; one already gone is fine.
func (d *Driver) DeleteMachine(ctx context.Context, m *conformance.Machine) error {
	if err := d.srv.Destroy(ctx, m.Node.Name); err != nil && !errors.Is(err, vcsim.ErrNotFound) {
		return err
	}
	return nil
}

// BreakCloud takes the simulator down: connections are refused until
// restore brings the same inventory back on the same address.
func (d *Driver) BreakCloud(context.Context) (func(context.Context) error, error) {
	d.srv.Stop()
	return func(context.Context) error { return d.srv.Start() }, nil
}
