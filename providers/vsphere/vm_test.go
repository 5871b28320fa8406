package vsphere

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
	v1 "k8s.io/api/core/v1"
)

func cidrs(ss ...string) []*net.IPNet {
	var out []*net.IPNet
	for _, s := range ss {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			panic(err)
		}
		out = append(out, n)
	}
	return out
}

func TestAddresses(t *testing.T) {
	h := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeHostName, Address: a} }
	in := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: a} }
	ex := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeExternalIP, Address: a} }
	twoNICs := []types.GuestNicInfo{
		{Network: "Public", IpAddress: []string{"203.0.113.5", "2001:db8::5"}, DeviceConfigId: 4000},
		{Network: "Private", IpAddress: []string{"10.0.0.5", "fd00::5", "fe80::1"}, DeviceConfigId: 4001},
	}
	for _, tc := range []struct {
		name     string
		nets     []types.GuestNicInfo
		nodes    Nodes
		families []string
		want     []v1.NodeAddress
		wantErr  string
	}{
		{name: "default: first IPv4 is both", nets: twoNICs, families: []string{IPv4},
			want: []v1.NodeAddress{h("node"), in("203.0.113.5"), ex("203.0.113.5")}},
		{name: "internal subnet", nets: twoNICs, nodes: Nodes{InternalNetworkSubnets: cidrs("10.0.0.0/8")}, families: []string{IPv4},
			want: []v1.NodeAddress{h("node"), in("10.0.0.5")}},
		{name: "both subnets", nets: twoNICs, nodes: Nodes{InternalNetworkSubnets: cidrs("10.0.0.0/8"), ExternalNetworkSubnets: cidrs("203.0.113.0/24")},
			families: []string{IPv4}, want: []v1.NodeAddress{h("node"), in("10.0.0.5"), ex("203.0.113.5")}},
		{name: "network names, case-insensitive", nets: twoNICs, nodes: Nodes{InternalVMNetworkName: "private", ExternalVMNetworkName: "PUBLIC"},
			families: []string{IPv4}, want: []v1.NodeAddress{h("node"), in("10.0.0.5"), ex("203.0.113.5")}},
		{name: "subnet beats network name", nets: twoNICs, nodes: Nodes{InternalNetworkSubnets: cidrs("203.0.113.0/24"), InternalVMNetworkName: "Private"},
			families: []string{IPv4}, want: []v1.NodeAddress{h("node"), in("203.0.113.5")}},
		{name: "exclusion", nets: twoNICs, nodes: Nodes{ExcludeInternalNetworkSubnets: cidrs("203.0.113.0/24")}, families: []string{IPv4},
			want: []v1.NodeAddress{h("node"), in("10.0.0.5"), ex("203.0.113.5")}},
		{name: "IPv6 only, link-local left out", nets: twoNICs, nodes: Nodes{InternalVMNetworkName: "Private"}, families: []string{IPv6},
			want: []v1.NodeAddress{h("node"), in("fd00::5")}},
		{name: "dual stack, IPv6 first", nets: twoNICs, nodes: Nodes{InternalVMNetworkName: "Private"}, families: []string{IPv6, IPv4},
			want: []v1.NodeAddress{h("node"), in("fd00::5"), in("10.0.0.5")}},
		{name: "not a virtual NIC", nets: []types.GuestNicInfo{{Network: "x", IpAddress: []string{"172.17.0.1"}, DeviceConfigId: -1}, twoNICs[1]},
			families: []string{IPv4}, want: []v1.NodeAddress{h("node"), in("10.0.0.5"), ex("10.0.0.5")}},
		{name: "no IPs", nets: []types.GuestNicInfo{{Network: "x", DeviceConfigId: 4000}}, families: []string{IPv4},
			wantErr: "VM vm-1 has no IP addresses yet (VMware Tools not reporting?)"},
		{name: "no NICs", families: []string{IPv4}, wantErr: "VM vm-1 has no IP addresses yet"},
		{name: "only local IPs", nets: []types.GuestNicInfo{{IpAddress: []string{"127.0.0.1", "fe80::2"}, DeviceConfigId: 4000}},
			families: []string{IPv4}, wantErr: "only loopback, link-local"},
		{name: "family missing", nets: []types.GuestNicInfo{{IpAddress: []string{"10.0.0.1"}, DeviceConfigId: 4000}},
			families: []string{IPv4, IPv6}, wantErr: "no usable ipv6 address"},
		{name: "neither network present", nets: twoNICs, nodes: Nodes{InternalVMNetworkName: "a", ExternalVMNetworkName: "b"},
			families: []string{IPv4}, wantErr: `no NIC on network "a" or "b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &vm{name: "vm-1", hostName: "node", nets: tc.nets}
			got, err := r.addresses(&tc.nodes, tc.families)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("addresses = %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("addresses = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestInstanceType(t *testing.T) {
	for _, tc := range []struct {
		guest string
		cpu   int32
		mem   int32
		want  string
	}{
		{"ubuntu64Guest", 4, 16384, "vsphere-vm.cpu-4.mem-16gb.os-ubuntu"},
		{"windows9Server64Guest", 2, 8192, "vsphere-vm.cpu-2.mem-8gb.os-win10server"},
		{"redhatGuest", 1, 1536, "vsphere-vm.cpu-1.mem-1gb.os-rhel"},
		{"otherGuest64", 1, 512, "vsphere-vm.cpu-1.mem-0gb.os-other"},
		{"vmwarePhoton64Guest", 8, 32768, "vsphere-vm.cpu-8.mem-32gb.os-photon"},
		{"rhel9_64Guest", 2, 4096, "vsphere-vm.cpu-2.mem-4gb.os-unknown"},
	} {
		r := &vm{guestID: tc.guest, numCPU: tc.cpu, memoryMB: tc.mem}
		if got := r.instanceType(); got != tc.want {
			t.Errorf("instanceType(%s) = %q, want %q", tc.guest, got, tc.want)
		}
	}
	if n := len(guestOS); n != 148 {
		t.Errorf("%d guest OS identifiers, want upstream's 148", n)
	}
}

func TestSwapUUID(t *testing.T) {
	bios := "4213abcd-ef01-2345-6789-0123456789ab"
	kubelet := "cdab1342-01ef-4523-6789-0123456789ab"
	if got := swapUUID(bios); got != kubelet {
		t.Errorf("swapUUID(%s) = %s, want %s", bios, got, kubelet)
	}
	if got := swapUUID(strings.ToUpper(kubelet)); got != bios {
		t.Errorf("swapUUID back = %s", got)
	}
	if swapUUID("not-a-uuid") != "" {
		t.Error("swapUUID accepted a non-UUID")
	}
	if _, err := uuidFromProviderID("aws:///i-1"); err == nil {
		t.Error("uuidFromProviderID accepted another provider's ID")
	}
}

// FuzzUUIDs checks that provider IDs and UUID conversions never panic and
// that swapping twice gives the UUID back.
func FuzzUUIDs(f *testing.F) {
	f.Add("vsphere://4213abcd-ef01-2345-6789-0123456789ab")
	f.Fuzz(func(t *testing.T, in string) {
		u, err := uuidFromProviderID(in)
		if err != nil {
			return
		}
		if s := swapUUID(u); s != "" && swapUUID(s) != u {
			t.Fatalf("swap(swap(%q)) = %q", u, swapUUID(s))
		}
	})
}
