package devenv

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stratus-ccm/stratus/vcsim"
)

// TestPeerNetworkInsideBlock: the VMs' node agents listen inside the
// environment's block, on addresses minicloud never hands out.
func TestPeerNetworkInsideBlock(t *testing.T) {
	for _, block := range []int{1, 200, 254} {
		peer := peerNetwork(block)
		inst, pub, vip := addressPools(block)
		if !inst.Contains(peer.Via.Addr()) || peer.Via.Bits() <= inst.Bits() {
			t.Errorf("block %d: via %s not inside the instance pool %s", block, peer.Via, inst)
		}
		ownInstances := netip.PrefixFrom(inst.Addr(), peer.Via.Bits())
		if ownInstances.Overlaps(peer.Via) || pub.Overlaps(peer.Via) || vip.Overlaps(peer.Via) {
			t.Errorf("block %d: via %s overlaps minicloud's pools %s %s %s", block, peer.Via, ownInstances, pub, vip)
		}
		if a, ok := peer.Translate(netip.MustParseAddr(vcsim.NodeIPv4(0))); !ok || a.As4()[1] != byte(block) {
			t.Errorf("block %d: VM 0's address %s translates to %s, %t", block, vcsim.NodeIPv4(0), a, ok)
		}
	}
}

// TestVSphereMachines runs the fleet's view of a simulated vCenter: one
// machine per powered-on VM with an address on the VMs' network, named
// after the VM, with its UUID as system UUID and its agent on the
// address's loopback counterpart.
func TestVSphereMachines(t *testing.T) {
	ctx := context.Background()
	vc, err := vcsim.Start(ctx, vcsim.Options{VMs: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vc.Close)
	if err := vc.PowerOff(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	// Outside the network load balancers reach: no kubelet.
	if _, err := vc.Create(ctx, vcsim.VMSpec{Name: "far", Guest: &vcsim.Guest{Hostname: "far", NICs: []vcsim.NIC{{Network: vcsim.DefaultNetwork, IPs: []string{"192.168.1.5"}}}}}); err != nil {
		t.Fatal(err)
	}
	vms, err := vc.VMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uuid := func(name string) string {
		return vms[slices.IndexFunc(vms, func(v vcsim.VM) bool { return v.Name == name })].UUID
	}
	machines, err := vsphereMachines(vc, peerNetwork(210))(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []Kubelet
	for _, m := range machines {
		got = append(got, m.Kubelet)
	}
	slices.SortFunc(got, func(a, b Kubelet) int { return strings.Compare(a.Name, b.Name) })
	want := []Kubelet{
		{Name: "node-0", IP: "10.0.0.1", ListenIP: "127.210.32.1", SystemUUID: strings.ToUpper(uuid("node-0"))},
		{Name: "node-2", IP: "10.0.0.3", ListenIP: "127.210.32.3", SystemUUID: strings.ToUpper(uuid("node-2"))},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubelets (-want +got):\n%s", diff)
	}
	for _, m := range machines {
		if m.ID != strings.ToLower(m.Kubelet.SystemUUID) {
			t.Errorf("machine %s: ID %s, want its VM's UUID", m.Kubelet.Name, m.ID)
		}
	}
}

func TestCheckCloud(t *testing.T) {
	dir := t.TempDir()
	if err := checkCloud(dir, CloudVSphere); err != nil {
		t.Fatal(err)
	}
	if err := checkCloud(dir, CloudVSphere); err != nil {
		t.Errorf("restart with the same cloud: %v", err)
	}
	if err := checkCloud(dir, CloudMinicloud); err == nil || !strings.Contains(err.Error(), "--cloud minicloud") || !strings.Contains(err.Error(), "vsphere environment") {
		t.Errorf("switching clouds: %v, want an error naming --cloud and the state dir's cloud", err)
	}
	// A cluster made before --cloud existed is minicloud's.
	old := t.TempDir()
	if err := os.Mkdir(filepath.Join(old, "etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := checkCloud(old, CloudVSphere); err == nil || !strings.Contains(err.Error(), "minicloud environment") {
		t.Errorf("old minicloud state dir with --cloud vsphere: %v", err)
	}
}
