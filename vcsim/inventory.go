package vcsim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"
)

// ErrNotFound is returned (wrapped) for a VM name that matches no VM.
var ErrNotFound = errors.New("no such VM")

// inputError is an error of the caller's input (a VMSpec, a Guest), which
// the control API answers with 400.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &inputError{fmt.Sprintf(format, args...)}
}

// Node VM hardware: the upstream provider derives the instance type
// "vsphere-vm.cpu-2.mem-4gb.os-ubuntu" from it.
const (
	nodeCPUs     = 2
	nodeMemoryMB = 4096
	nodeGuestID  = string(types.VirtualMachineGuestOsIdentifierUbuntu64Guest)
)

// zone is one cluster or standalone host: where VMs are placed, and the
// object its zone tag is attached to.
type zone struct {
	name, region, datacenter string
	tagged                   types.ManagedObjectReference // the cluster, or the standalone HostSystem
	compute                  types.ManagedObjectReference
	pool                     *object.ResourcePool
	hosts                    []*object.HostSystem
	folder                   *object.Folder
	network                  object.NetworkReference
}

// inventory is what Start built on top of the simulator's model.
type inventory struct {
	zones     []*zone
	byCompute map[types.ManagedObjectReference]*zone
	nodes     []string

	mu   sync.Mutex
	next int // index of the next VM Create places and addresses
}

// Guest is what VMware Tools would report from inside a VM.
type Guest struct {
	Hostname string `json:"hostname"`
	NICs     []NIC  `json:"nics,omitempty"`
}

// NIC is one guest network adapter: guest.net[i].
type NIC struct {
	Network string   `json:"network"` // the port group name, e.g. "VM Network"
	IPs     []string `json:"ips"`     // IPv4 and IPv6 addresses
}

// VM is a VM as the simulator holds it.
type VM struct {
	Name         string                         `json:"name"`
	Ref          types.ManagedObjectReference   `json:"ref"`
	UUID         string                         `json:"uuid"`         // config.uuid, the BIOS UUID (lowercase)
	InstanceUUID string                         `json:"instanceUuid"` // config.instanceUuid
	PowerState   types.VirtualMachinePowerState `json:"powerState"`
	Host         string                         `json:"host"` // the HostSystem's name
	Datacenter   string                         `json:"datacenter"`
	Zone         string                         `json:"zone"`   // the name of its zone tag
	Region       string                         `json:"region"` // the name of its region tag
	Guest        Guest                          `json:"guest"`
}

// VMSpec describes a VM for Create.
type VMSpec struct {
	Name string `json:"name"`
	// Zone is the zone tag name to place the VM in (default: the next zone
	// round-robin, continuing after the node VMs).
	Zone string `json:"zone,omitempty"`
	// Guest is the guest info to report (default: hostname Name and the
	// next node addresses, see NodeIPv4).
	Guest *Guest `json:"guest,omitempty"`
	// PoweredOff leaves the VM off (with no guest info, as a real VM).
	PoweredOff bool `json:"poweredOff,omitempty"`
}

// NodeIPv4 returns the IPv4 address of the VM with index i:
// 10.0.<i/250>.<i%250+1>.
func NodeIPv4(i int) string {
	return fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
}

// NodeIPv6 returns the IPv6 address of the VM with index i: fd00:10::<i+1>
// (hexadecimal).
func NodeIPv6(i int) string {
	a := netip.MustParseAddr("fd00:10::").As16()
	n := uint32(i + 1)
	a[12], a[13], a[14], a[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return netip.AddrFrom16(a).String()
}

func zoneName(i int) string {
	if i < 26 {
		return "zone-" + string(rune('a'+i))
	}
	return fmt.Sprintf("zone-%d", i+1)
}

func newInventory(ctx context.Context, s *Server) (*inventory, error) {
	inv := &inventory{byCompute: map[types.ManagedObjectReference]*zone{}}
	finder := find.NewFinder(s.c, false)
	dcs, err := finder.DatacenterList(ctx, "*")
	if err != nil {
		return nil, fmt.Errorf("vcsim: list datacenters: %w", err)
	}
	slices.SortFunc(dcs, func(a, b *object.Datacenter) int { return strings.Compare(a.Name(), b.Name()) })
	regions := map[string]types.ManagedObjectReference{} // region tag -> datacenter
	for i, dc := range dcs {
		region := fmt.Sprintf("region-%d", i+1)
		regions[region] = dc.Reference()
		finder.SetDatacenter(dc)
		folders, err := dc.Folders(ctx)
		if err != nil {
			return nil, fmt.Errorf("vcsim: folders of %s: %w", dc.Name(), err)
		}
		network, err := finder.Network(ctx, s.opts.Network)
		if err != nil {
			return nil, fmt.Errorf("vcsim: network %q in %s: %w", s.opts.Network, dc.Name(), err)
		}
		crs, err := finder.ComputeResourceList(ctx, "*")
		if err != nil {
			return nil, fmt.Errorf("vcsim: list compute resources of %s: %w", dc.Name(), err)
		}
		// Clusters first, then standalone hosts, each by name.
		slices.SortFunc(crs, func(a, b *object.ComputeResource) int {
			ca, cb := a.Reference().Type == "ClusterComputeResource", b.Reference().Type == "ClusterComputeResource"
			if ca != cb {
				if ca {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Name(), b.Name())
		})
		for _, cr := range crs {
			hosts, err := cr.Hosts(ctx)
			if err != nil {
				return nil, fmt.Errorf("vcsim: hosts of %s: %w", cr.Name(), err)
			}
			pool, err := cr.ResourcePool(ctx)
			if err != nil {
				return nil, fmt.Errorf("vcsim: resource pool of %s: %w", cr.Name(), err)
			}
			slices.SortFunc(hosts, func(a, b *object.HostSystem) int { return strings.Compare(a.Name(), b.Name()) })
			z := &zone{
				name: zoneName(len(inv.zones)), region: region, datacenter: dc.Name(),
				compute: cr.Reference(), tagged: cr.Reference(),
				pool: pool, hosts: hosts, folder: folders.VmFolder, network: network,
			}
			if cr.Reference().Type != "ClusterComputeResource" {
				z.tagged = hosts[0].Reference()
			}
			inv.zones = append(inv.zones, z)
			inv.byCompute[z.compute] = z
		}
	}
	if err := s.tag(ctx, inv.zones, regions); err != nil {
		return nil, err
	}
	s.inv = inv

	inv.nodes = make([]string, s.opts.VMs)
	for i := range inv.nodes {
		inv.nodes[i] = fmt.Sprintf(s.opts.NamePattern, i)
	}
	inv.next = s.opts.VMs
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8) // the simulator serializes on its folder lock beyond a few
	for i, name := range inv.nodes {
		g.Go(func() error {
			z := inv.zones[i%len(inv.zones)]
			return s.create(gctx, name, z, i, s.nodeGuest(name, i), false)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return inv, nil
}

// tag creates the zone and region categories and tags and attaches them,
// through the simulator's own listener so that no request is counted.
func (s *Server) tag(ctx context.Context, zones []*zone, regions map[string]types.ManagedObjectReference) error {
	rc, err := s.restClient(ctx, s.sim.URL)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Logout(ctx) }()
	m := tags.NewManager(rc)
	newCategory := func(name string, kinds ...string) (string, error) {
		id, err := m.CreateCategory(ctx, &tags.Category{Name: name, Cardinality: "SINGLE", AssociableTypes: kinds})
		if err != nil {
			return "", fmt.Errorf("vcsim: create tag category %s: %w", name, err)
		}
		return id, nil
	}
	attach := func(category, name string, ref types.ManagedObjectReference) error {
		id, err := m.CreateTag(ctx, &tags.Tag{Name: name, CategoryID: category})
		if err != nil {
			return fmt.Errorf("vcsim: create tag %s: %w", name, err)
		}
		if err := m.AttachTag(ctx, id, ref); err != nil {
			return fmt.Errorf("vcsim: attach tag %s to %s: %w", name, ref, err)
		}
		return nil
	}
	regionCat, err := newCategory(s.opts.RegionCategory, "Datacenter", "Folder")
	if err != nil {
		return err
	}
	zoneCat, err := newCategory(s.opts.ZoneCategory, "ClusterComputeResource", "ComputeResource", "HostSystem", "ResourcePool", "Folder")
	if err != nil {
		return err
	}
	for name, ref := range regions {
		if err := attach(regionCat, name, ref); err != nil {
			return err
		}
	}
	for _, z := range zones {
		if err := attach(zoneCat, z.name, z.tagged); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) nodeGuest(name string, i int) *Guest {
	ips := []string{NodeIPv4(i)}
	if s.opts.IPv6 {
		ips = append(ips, NodeIPv6(i))
	}
	return &Guest{Hostname: name, NICs: []NIC{{Network: s.opts.Network, IPs: ips}}}
}

// create makes VM name in z on the host its index picks, powers it on and
// sets its guest info unless poweredOff.
func (s *Server) create(ctx context.Context, name string, z *zone, i int, g *Guest, poweredOff bool) error {
	backing, err := z.network.EthernetCardBackingInfo(ctx)
	if err != nil {
		return fmt.Errorf("vcsim: create VM %s: network backing: %w", name, err)
	}
	var devices object.VirtualDeviceList
	nic, err := devices.CreateEthernetCard("vmxnet3", backing)
	if err != nil {
		return fmt.Errorf("vcsim: create VM %s: NIC: %w", name, err)
	}
	change, err := object.VirtualDeviceList{nic}.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return fmt.Errorf("vcsim: create VM %s: NIC: %w", name, err)
	}
	spec := types.VirtualMachineConfigSpec{
		Name:         name,
		GuestId:      nodeGuestID,
		NumCPUs:      nodeCPUs,
		MemoryMB:     nodeMemoryMB,
		Files:        &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
		DeviceChange: change,
	}
	host := z.hosts[(i/len(s.inv.zones))%len(z.hosts)]
	task, err := z.folder.CreateVM(ctx, spec, z.pool, host)
	if err != nil {
		return fmt.Errorf("vcsim: create VM %s: %w", name, err)
	}
	res, err := task.WaitForResult(ctx)
	if err != nil {
		return fmt.Errorf("vcsim: create VM %s: %w", name, err)
	}
	if poweredOff {
		return nil
	}
	ref := res.Result.(types.ManagedObjectReference)
	if err := s.power(ctx, name, ref, (*object.VirtualMachine).PowerOn); err != nil {
		return err
	}
	return s.setGuest(ctx, name, ref, *g)
}

// Nodes returns the names of the node VMs Start created, by index.
func (s *Server) Nodes() []string { return slices.Clone(s.inv.nodes) }

// Zones returns the zone tag names, in placement order.
func (s *Server) Zones() []string {
	out := make([]string, len(s.inv.zones))
	for i, z := range s.inv.zones {
		out[i] = z.name
	}
	return out
}

// Datacenters returns the datacenter names.
func (s *Server) Datacenters() []string {
	var out []string
	for _, z := range s.inv.zones {
		if !slices.Contains(out, z.datacenter) {
			out = append(out, z.datacenter)
		}
	}
	return out
}

// lookup finds the VM named name in the simulator's registry.
func (s *Server) lookup(name string) (types.ManagedObjectReference, error) {
	var refs []types.ManagedObjectReference
	for _, e := range s.model.Map().All("VirtualMachine") {
		if e.Entity().Name == name {
			refs = append(refs, e.Reference())
		}
	}
	switch len(refs) {
	case 0:
		return types.ManagedObjectReference{}, fmt.Errorf("vcsim: VM %q: %w", name, ErrNotFound)
	case 1:
		return refs[0], nil
	default:
		return types.ManagedObjectReference{}, fmt.Errorf("vcsim: VM name %q matches %d VMs", name, len(refs))
	}
}

var vmProps = []string{"name", "config.uuid", "config.instanceUuid", "runtime.powerState", "runtime.host", "guest.hostName", "guest.net"}

// VM returns the VM named name.
func (s *Server) VM(ctx context.Context, name string) (VM, error) {
	ref, err := s.lookup(name)
	if err != nil {
		return VM{}, err
	}
	vms, err := s.describe(ctx, []types.ManagedObjectReference{ref})
	if err != nil {
		return VM{}, fmt.Errorf("vcsim: VM %s: %w", name, err)
	}
	return vms[0], nil
}

// VMs returns every VM, sorted by name.
func (s *Server) VMs(ctx context.Context) ([]VM, error) {
	var refs []types.ManagedObjectReference
	for _, e := range s.model.Map().All("VirtualMachine") {
		refs = append(refs, e.Reference())
	}
	vms, err := s.describe(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("vcsim: list VMs: %w", err)
	}
	slices.SortFunc(vms, func(a, b VM) int { return strings.Compare(a.Name, b.Name) })
	return vms, nil
}

// describe reads refs through the in-process property collector, which
// takes the simulator's locks.
func (s *Server) describe(ctx context.Context, refs []types.ManagedObjectReference) ([]VM, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	pc := property.DefaultCollector(s.c)
	var mvms []mo.VirtualMachine
	if err := pc.Retrieve(ctx, refs, vmProps, &mvms); err != nil {
		return nil, err
	}
	hostRefs := map[types.ManagedObjectReference]bool{}
	for _, v := range mvms {
		if v.Runtime.Host != nil {
			hostRefs[*v.Runtime.Host] = true
		}
	}
	var hosts []mo.HostSystem
	if len(hostRefs) > 0 {
		if err := pc.Retrieve(ctx, slices.Collect(maps.Keys(hostRefs)), []string{"name", "parent"}, &hosts); err != nil {
			return nil, err
		}
	}
	byHost := map[types.ManagedObjectReference]mo.HostSystem{}
	for _, h := range hosts {
		byHost[h.Self] = h
	}
	out := make([]VM, 0, len(mvms))
	for _, v := range mvms {
		vm := VM{Name: v.Name, Ref: v.Self, PowerState: v.Runtime.PowerState}
		if v.Config != nil {
			vm.UUID, vm.InstanceUUID = v.Config.Uuid, v.Config.InstanceUuid
		}
		if v.Runtime.Host != nil {
			h := byHost[*v.Runtime.Host]
			vm.Host = h.Name
			if h.Parent != nil {
				if z := s.inv.byCompute[*h.Parent]; z != nil {
					vm.Zone, vm.Region, vm.Datacenter = z.name, z.region, z.datacenter
				}
			}
		}
		if v.Guest != nil {
			vm.Guest.Hostname = v.Guest.HostName
			for _, n := range v.Guest.Net {
				vm.Guest.NICs = append(vm.Guest.NICs, NIC{Network: n.Network, IPs: n.IpAddress})
			}
		}
		out = append(out, vm)
	}
	return out, nil
}

// power runs a power operation on a VM and waits for its task.
func (s *Server) power(ctx context.Context, name string, ref types.ManagedObjectReference, op func(*object.VirtualMachine, context.Context) (*object.Task, error)) error {
	task, err := op(object.NewVirtualMachine(s.c, ref), ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("vcsim: VM %s: %w", name, err)
	}
	return nil
}

// PowerOff powers the VM off, as a hard stop; it fails on a VM that is
// already off, as vCenter does.
func (s *Server) PowerOff(ctx context.Context, name string) error {
	ref, err := s.lookup(name)
	if err != nil {
		return err
	}
	return s.power(ctx, name, ref, (*object.VirtualMachine).PowerOff)
}

// PowerOn powers the VM on; it fails on a VM that is already on. The
// simulator keeps the guest info from before the VM was powered off.
func (s *Server) PowerOn(ctx context.Context, name string) error {
	ref, err := s.lookup(name)
	if err != nil {
		return err
	}
	return s.power(ctx, name, ref, (*object.VirtualMachine).PowerOn)
}

// ShutdownGuest asks the guest to shut down and waits until the VM is
// powered off; it fails on a VM that is not on.
func (s *Server) ShutdownGuest(ctx context.Context, name string) error {
	ref, err := s.lookup(name)
	if err != nil {
		return err
	}
	if err := object.NewVirtualMachine(s.c, ref).ShutdownGuest(ctx); err != nil {
		return fmt.Errorf("vcsim: shut down VM %s: %w", name, err)
	}
	// vCenter answers at once and the guest powers off later.
	err = property.Wait(ctx, property.DefaultCollector(s.c), ref, []string{"runtime.powerState"}, func(pc []types.PropertyChange) bool {
		for _, c := range pc {
			if c.Val == types.VirtualMachinePowerStatePoweredOff {
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("vcsim: wait for VM %s to power off: %w", name, err)
	}
	return nil
}

// Destroy deletes the VM, powering it off first if it is on.
func (s *Server) Destroy(ctx context.Context, name string) error {
	ref, err := s.lookup(name)
	if err != nil {
		return err
	}
	vm := object.NewVirtualMachine(s.c, ref)
	state, err := vm.PowerState(ctx)
	if err != nil {
		return fmt.Errorf("vcsim: VM %s: %w", name, err)
	}
	if state == types.VirtualMachinePowerStatePoweredOn {
		if err := s.power(ctx, name, ref, (*object.VirtualMachine).PowerOff); err != nil {
			return err
		}
	}
	return s.power(ctx, name, ref, (*object.VirtualMachine).Destroy)
}

// Create makes a VM as Start makes node VMs: 2 vCPUs, 4 GiB, a NIC on the
// network of Options.Network, powered on with guest info.
func (s *Server) Create(ctx context.Context, spec VMSpec) (VM, error) {
	if spec.Name == "" {
		return VM{}, invalid("vcsim: create VM: Name is empty")
	}
	if _, err := s.lookup(spec.Name); err == nil {
		return VM{}, invalid("vcsim: create VM %s: a VM with that name exists", spec.Name)
	}
	s.inv.mu.Lock()
	i := s.inv.next
	s.inv.next++
	s.inv.mu.Unlock()
	z := s.inv.zones[i%len(s.inv.zones)]
	if spec.Zone != "" {
		z = nil
		for _, c := range s.inv.zones {
			if c.name == spec.Zone {
				z = c
			}
		}
		if z == nil {
			return VM{}, invalid("vcsim: create VM %s: Zone %q is none of %s", spec.Name, spec.Zone, strings.Join(s.Zones(), ", "))
		}
	}
	g := spec.Guest
	if g == nil {
		g = s.nodeGuest(spec.Name, i)
	} else if err := validGuest(*g); err != nil {
		return VM{}, invalid("vcsim: create VM %s: %v", spec.Name, err)
	}
	if err := s.create(ctx, spec.Name, z, i, g, spec.PoweredOff); err != nil {
		return VM{}, err
	}
	return s.VM(ctx, spec.Name)
}

// SetGuest replaces the guest info of the VM: guest.hostName,
// guest.ipAddress (the first IP) and guest.net, one entry per NIC, keeping
// the NICs' MAC addresses. Property collectors see the change.
func (s *Server) SetGuest(ctx context.Context, name string, g Guest) error {
	if err := validGuest(g); err != nil {
		return invalid("vcsim: set guest of VM %s: %v", name, err)
	}
	ref, err := s.lookup(name)
	if err != nil {
		return err
	}
	return s.setGuest(ctx, name, ref, g)
}

func validGuest(g Guest) error {
	for i, n := range g.NICs {
		for _, ip := range n.IPs {
			if _, err := netip.ParseAddr(ip); err != nil {
				return fmt.Errorf("Guest.NICs[%d].IPs: %w", i, err)
			}
		}
	}
	return nil
}

func (s *Server) setGuest(ctx context.Context, name string, ref types.ManagedObjectReference, g Guest) error {
	obj, ok := s.model.Map().Get(ref).(*simulator.VirtualMachine)
	if !ok {
		return fmt.Errorf("vcsim: VM %s: %w", name, ErrNotFound)
	}
	// A simulator.Context of our own: the registry's locks are held per
	// context, and the service's own context is shared.
	sctx := &simulator.Context{Context: ctx, Map: s.model.Map()}
	sctx.WithLock(obj, func() {
		var old []types.GuestNicInfo
		if obj.Guest != nil {
			old = obj.Guest.Net
		}
		nets := make([]types.GuestNicInfo, len(g.NICs))
		first := ""
		for i, n := range g.NICs {
			nic := types.GuestNicInfo{Network: n.Network, Connected: true, DeviceConfigId: int32(4000 + i), IpAddress: n.IPs}
			if i < len(old) {
				nic.MacAddress, nic.DeviceConfigId = old[i].MacAddress, old[i].DeviceConfigId
			} else {
				nic.MacAddress = fmt.Sprintf("00:50:56:%02x:%02x:%02x", byte(i), byte(len(name)), byte(i*7))
			}
			cfg := &types.NetIpConfigInfo{}
			for _, ip := range n.IPs {
				prefix := int32(24)
				if netip.MustParseAddr(ip).Is6() {
					prefix = 64
				}
				cfg.IpAddress = append(cfg.IpAddress, types.NetIpConfigInfoIpAddress{IpAddress: ip, PrefixLength: prefix, State: "preferred"})
				if first == "" {
					first = ip
				}
			}
			nic.IpConfig = cfg
			nets[i] = nic
		}
		sctx.Update(obj, []types.PropertyChange{
			{Name: "guest.hostName", Val: g.Hostname},
			{Name: "summary.guest.hostName", Val: g.Hostname},
			{Name: "guest.ipAddress", Val: first},
			{Name: "summary.guest.ipAddress", Val: first},
			{Name: "guest.net", Val: nets},
		})
	})
	return nil
}
