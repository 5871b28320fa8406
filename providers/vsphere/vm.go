package vsphere

import (
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
)

// vmProperties are the only VM properties the provider reads, in one
// retrieve or watch for all VMs. Whole config, summary or guest objects are
// never fetched: they are tens of kilobytes per VM.
var vmProperties = []string{
	"name",
	"config.uuid",
	"config.template",
	"config.guestId",
	"config.hardware.numCPU",
	"config.hardware.memoryMB",
	"runtime.powerState",
	"runtime.host",
	"guest.hostName",
	"guest.net",
}

// providerIDPrefix starts every provider ID of this provider, as upstream.
const providerIDPrefix = ProviderName + "://"

// vm is what the provider knows about one VM.
type vm struct {
	ref        types.ManagedObjectReference
	name       string
	uuid       string // BIOS UUID, lower case
	template   bool
	guestID    string
	numCPU     int32
	memoryMB   int32
	powerState types.VirtualMachinePowerState
	host       types.ManagedObjectReference
	hostName   string
	nets       []types.GuestNicInfo
}

// set applies one property value (nil when the property was removed or is
// unset). It reports false for a property it does not know.
func (r *vm) set(name string, val any) bool {
	switch name {
	case "name":
		r.name, _ = val.(string)
	case "config.uuid":
		// A VM whose configuration is briefly unavailable (an inaccessible
		// datastore) loses config.uuid; keeping the last one keeps its node.
		if s, _ := val.(string); s != "" {
			r.uuid = strings.ToLower(s)
		}
	case "config.template":
		r.template, _ = val.(bool)
	case "config.guestId":
		r.guestID, _ = val.(string)
	case "config.hardware.numCPU":
		r.numCPU, _ = val.(int32)
	case "config.hardware.memoryMB":
		r.memoryMB, _ = val.(int32)
	case "runtime.powerState":
		r.powerState, _ = val.(types.VirtualMachinePowerState)
	case "runtime.host":
		r.host, _ = val.(types.ManagedObjectReference)
	case "guest.hostName":
		r.hostName, _ = val.(string)
	case "guest.net":
		switch v := val.(type) {
		case types.ArrayOfGuestNicInfo:
			r.nets = v.GuestNicInfo
		case []types.GuestNicInfo:
			r.nets = v
		default:
			r.nets = nil
		}
	default:
		return false
	}
	return true
}

// equal reports whether two records would be listed the same.
func (r *vm) equal(o *vm) bool {
	return r.ref == o.ref && r.name == o.name && r.uuid == o.uuid && r.template == o.template && r.guestID == o.guestID &&
		r.numCPU == o.numCPU && r.memoryMB == o.memoryMB && r.powerState == o.powerState && r.host == o.host &&
		r.hostName == o.hostName && reflect.DeepEqual(r.nets, o.nets)
}

// listed reports whether the VM is a machine the provider lists: not a
// template, and with a BIOS UUID (a VM being created has none yet).
func (r *vm) listed() bool { return !r.template && r.uuid != "" }

// providerID is "vsphere://<lower-case BIOS UUID>", as upstream.
func (r *vm) providerID() string { return providerIDPrefix + r.uuid }

// instanceType is upstream's "vsphere-vm.cpu-<n>.mem-<GiB>gb.os-<os>".
func (r *vm) instanceType() string {
	os, ok := guestOS[r.guestID]
	if !ok {
		os = "unknown"
	}
	return fmt.Sprintf("vsphere-vm.cpu-%d.mem-%dgb.os-%s", r.numCPU, r.memoryMB/1024, os)
}

// uuidFromProviderID returns the lower-case UUID of a provider ID of this
// provider.
func uuidFromProviderID(providerID string) (string, error) {
	id, ok := strings.CutPrefix(providerID, providerIDPrefix)
	id = strings.ToLower(strings.TrimSpace(id))
	if !ok || id == "" || strings.ContainsAny(id, "/?#") {
		return "", fmt.Errorf("provider ID %q is not of the form %s<BIOS UUID>", providerID, providerIDPrefix)
	}
	return id, nil
}

// swapUUID converts between the BIOS UUID vSphere reports and the one the
// guest reads from SMBIOS (kubelet's systemUUID): the first three groups are
// stored little-endian, so their bytes are reversed. It returns "" for a
// string that is not a UUID.
func swapUUID(u string) string {
	if len(u) != 36 || u[8] != '-' || u[13] != '-' || u[18] != '-' || u[23] != '-' {
		return ""
	}
	rev := func(s string) string {
		b := make([]byte, 0, len(s))
		for i := len(s) - 2; i >= 0; i -= 2 {
			b = append(b, s[i], s[i+1])
		}
		return string(b)
	}
	return strings.ToLower(rev(u[0:8]) + "-" + rev(u[9:13]) + "-" + rev(u[14:18]) + u[18:])
}

// systemUUIDs are the VM's BIOS UUID in both byte orders.
func (r *vm) systemUUIDs() []string {
	if s := swapUUID(r.uuid); s != "" && s != r.uuid {
		return []string{r.uuid, s}
	}
	return []string{r.uuid}
}

// errNoAddresses says why a VM has no node addresses.
type errNoAddresses struct{ msg string }

func (e *errNoAddresses) Error() string { return e.msg }

// addresses selects the node addresses of r following upstream's rules: the
// guest host name first, then for each IP family in order an InternalIP and
// an ExternalIP. Candidates are the IPs of the VM's virtual NICs, without
// loopback, link-local and unspecified addresses. Subnet matches
// (internal/externalNetworkSubnetCidr) win, then network-name matches
// (internal/externalVmNetworkName); when neither finds anything, the first
// candidate of the family is both InternalIP and ExternalIP. The exclude
// subnets remove candidates of their kind. A family without any address is
// an error, as upstream.
func (r *vm) addresses(n *Nodes, families []string) ([]v1.NodeAddress, error) {
	var addrs []v1.NodeAddress
	add := func(t v1.NodeAddressType, a string) {
		na := v1.NodeAddress{Type: t, Address: a}
		if !slices.Contains(addrs, na) {
			addrs = append(addrs, na)
		}
	}
	if r.hostName != "" {
		add(v1.NodeHostName, r.hostName)
	}
	var cands []candidate
	var networks []string
	reported := 0
	for _, nic := range r.nets {
		if nic.DeviceConfigId == -1 { // not a virtual NIC of the VM (e.g. a guest bridge)
			continue
		}
		networks = append(networks, nic.Network)
		for _, s := range nic.IpAddress {
			reported++
			ip := net.ParseIP(s)
			if ip == nil || ip.IsUnspecified() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
				continue
			}
			cands = append(cands, candidate{ip: ip, text: s, network: nic.Network})
		}
	}
	if reported == 0 {
		return nil, &errNoAddresses{fmt.Sprintf("VM %s has no IP addresses yet (VMware Tools not reporting?)", r.name)}
	}
	if n.InternalVMNetworkName != "" && n.ExternalVMNetworkName != "" &&
		!containsFold(networks, n.InternalVMNetworkName) && !containsFold(networks, n.ExternalVMNetworkName) {
		return nil, &errNoAddresses{fmt.Sprintf("VM %s has no NIC on network %q or %q (nodes: internalVmNetworkName, externalVmNetworkName); its networks: %q",
			r.name, n.InternalVMNetworkName, n.ExternalVMNetworkName, networks)}
	}
	if len(cands) == 0 {
		return nil, &errNoAddresses{fmt.Sprintf("VM %s has only loopback, link-local or unspecified IP addresses", r.name)}
	}
	for _, fam := range families {
		internal, external := selectIPs(cands, fam, n)
		if internal == nil && external == nil {
			return nil, &errNoAddresses{fmt.Sprintf("VM %s has no usable %s address (ipFamily %v, nodes: settings)", r.name, fam, families)}
		}
		if internal != nil {
			add(v1.NodeInternalIP, internal.text)
		}
		if external != nil {
			add(v1.NodeExternalIP, external.text)
		}
	}
	return addrs, nil
}

type candidate struct {
	ip      net.IP
	text    string
	network string
}

func selectIPs(cands []candidate, family string, n *Nodes) (internal, external *candidate) {
	var ofFamily []candidate
	for _, c := range cands {
		if (c.ip.To4() != nil) == (family == IPv4) {
			ofFamily = append(ofFamily, c)
		}
	}
	intCands := excluding(ofFamily, n.ExcludeInternalNetworkSubnets)
	extCands := excluding(ofFamily, n.ExcludeExternalNetworkSubnets)
	internal = inSubnets(intCands, n.InternalNetworkSubnets)
	external = inSubnets(extCands, n.ExternalNetworkSubnets)
	if internal == nil {
		internal = onNetwork(intCands, n.InternalVMNetworkName)
	}
	if external == nil {
		external = onNetwork(extCands, n.ExternalVMNetworkName)
	}
	if internal == nil && external == nil {
		if len(intCands) > 0 {
			internal = &intCands[0]
		}
		if len(extCands) > 0 {
			external = &extCands[0]
		}
	}
	return internal, external
}

func excluding(cands []candidate, subnets []*net.IPNet) []candidate {
	var out []candidate
	for _, c := range cands {
		if !slices.ContainsFunc(subnets, func(s *net.IPNet) bool { return s.Contains(c.ip) }) {
			out = append(out, c)
		}
	}
	return out
}

// inSubnets returns the first candidate in the first subnet that has one.
func inSubnets(cands []candidate, subnets []*net.IPNet) *candidate {
	for _, s := range subnets {
		for i := range cands {
			if s.Contains(cands[i].ip) {
				return &cands[i]
			}
		}
	}
	return nil
}

func onNetwork(cands []candidate, network string) *candidate {
	if network == "" {
		return nil
	}
	for i := range cands {
		if strings.EqualFold(cands[i].network, network) {
			return &cands[i]
		}
	}
	return nil
}

func containsFold(ss []string, s string) bool {
	return slices.ContainsFunc(ss, func(x string) bool { return strings.EqualFold(x, s) })
}
