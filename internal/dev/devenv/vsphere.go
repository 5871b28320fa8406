package devenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/vcsim"
	"github.com/vmware/govmomi/vim25/types"
)

// The clouds of --cloud: where the nodes' machines come from. Load
// balancers always come from minicloud (with openstack, through its
// OpenStack dialect's Octavia).
const (
	CloudMinicloud = "minicloud"
	CloudOpenStack = "openstack"
	CloudVSphere   = "vsphere"
)

// Clouds lists the values of --cloud.
var Clouds = []string{CloudMinicloud, CloudOpenStack, CloudVSphere}

// cloudFile records in the state dir which cloud an environment was made
// for: its cluster's nodes and its cloud state belong to that cloud.
const cloudFile = "cloud"

// vmNetwork holds the simulated VMs' addresses (vcsim.NodeIPv4: 10.0.0.1,
// 10.0.0.2, ...). minicloud's load balancers reach it through the upper
// half of the environment's instance pool, 127.X.32.0/19 (see
// peerNetwork), where the VMs' node agents listen.
var vmNetwork = netip.MustParsePrefix("10.0.0.0/19")

// peerNetwork maps vmNetwork onto 127.<block>.32.0/19. With --cloud vsphere
// minicloud's own instances (none are created for nodes) keep
// 127.<block>.0.0/19.
func peerNetwork(block int) minicloud.PeerNetwork {
	return minicloud.PeerNetwork{
		Network: vmNetwork,
		Via:     netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(block), 32, 0}), vmNetwork.Bits()),
	}
}

// checkCloud returns an error naming --cloud when the state dir was made
// for another cloud, and records the cloud of a new one. A state dir with
// a cluster but no record was made before --cloud existed: minicloud.
func checkCloud(stateDir, cloud string) error {
	path := filepath.Join(stateDir, cloudFile)
	raw, err := os.ReadFile(path)
	var had string
	switch {
	case err == nil:
		had = strings.TrimSpace(string(raw))
	case errors.Is(err, fs.ErrNotExist):
		if fileExists(filepath.Join(stateDir, "etcd")) {
			had = CloudMinicloud
		}
	default:
		return fmt.Errorf("state dir: %w", err)
	}
	if had != "" && had != cloud {
		return fmt.Errorf("--cloud %s: state dir %s holds a %s environment; use another --state-dir (or remove this one)", cloud, stateDir, had)
	}
	if err := os.WriteFile(path, []byte(cloud+"\n"), 0o644); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return nil
}

// vcenterDir holds the simulated vCenter's CA and server.json (where
// `stratus vcsim vm` finds it).
func (e *env) vcenterDir() string { return filepath.Join(e.opts.StateDir, "vcsim") }

func (e *env) vcenterAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.VCenter))
}

// vsphereConfigPath is the vSphere provider's cloud config.
func (e *env) vsphereConfigPath() string { return filepath.Join(e.opts.StateDir, "vsphere.conf") }

// startVCenter serves a simulated vCenter in this process with opts.Nodes
// powered-on VMs and its control API, and writes what the client commands
// and the vSphere provider need: <state-dir>/vcsim/server.json and ca.pem,
// and <state-dir>/vsphere.conf. Its inventory lives in memory: every start
// makes the VMs again, with the same UUIDs (the simulator derives them from
// the VMs' names), and loses what changed while it ran (VMs created,
// destroyed, powered off).
func (e *env) startVCenter(ctx context.Context) (*vcsim.Server, error) {
	dir := e.vcenterDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("vcsim state: %w", err)
	}
	vc, err := vcsim.Start(ctx, vcsim.Options{
		VMs:     e.opts.Nodes,
		Listen:  e.vcenterAddr(),
		CAFile:  filepath.Join(dir, "ca.pem"),
		Control: true,
	})
	if err != nil {
		return nil, err
	}
	if err := vcsim.WriteState(dir, vc.State()); err != nil {
		vc.Close()
		return nil, err
	}
	// The cloud config holds the simulator's password: owner only.
	if err := os.WriteFile(e.vsphereConfigPath(), vc.CloudConfig(vcsim.TrustCAFile), 0o600); err != nil {
		vc.Close()
		return nil, fmt.Errorf("write the vSphere cloud config: %w", err)
	}
	return vc, nil
}

// poweredOnVMs returns the names of the powered-on VMs.
func poweredOnVMs(ctx context.Context, vc *vcsim.Server) ([]string, error) {
	vms, err := vc.VMs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list VMs: %w", err)
	}
	var names []string
	for _, vm := range vms {
		if vm.PowerState == types.VirtualMachinePowerStatePoweredOn {
			names = append(names, vm.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// deleteStaleNodes deletes the Nodes of VMs the simulated vCenter no longer
// has: its inventory is new at every start, so a Node kept from an earlier
// run names a VM (by system UUID and provider ID) that is gone. Its kubelet
// registers it again for the VM of the same name.
func (e *env) deleteStaleNodes(ctx context.Context, cs kubernetes.Interface, vc *vcsim.Server) error {
	vms, err := vc.VMs(ctx)
	if err != nil {
		return fmt.Errorf("list VMs: %w", err)
	}
	current := map[string]bool{}
	for _, vm := range vms {
		current[strings.ToLower(vm.UUID)] = true
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		uuid := strings.ToLower(n.Status.NodeInfo.SystemUUID)
		if id, ok := strings.CutPrefix(n.Spec.ProviderID, "vsphere://"); ok {
			uuid = strings.ToLower(id)
		}
		if current[uuid] {
			continue
		}
		err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete stale node %s: %w", n.Name, err)
		}
		e.say("node %s: its VM went with the last run's simulated vCenter (it keeps no state); node deleted", n.Name)
	}
	return nil
}

// vsphereMachines lists the powered-on VMs as machines: a kubelet named
// after the VM, with its first IPv4 address as node IP, its BIOS UUID as
// system UUID (in upper case, as kubelet reads it from the firmware), and
// its node agent on the address's counterpart in peer.Via.
func vsphereMachines(vc *vcsim.Server, peer minicloud.PeerNetwork) func(context.Context) ([]machine, error) {
	return func(ctx context.Context) ([]machine, error) {
		vms, err := vc.VMs(ctx)
		if err != nil {
			return nil, err
		}
		var out []machine
		for _, vm := range vms {
			if vm.PowerState != types.VirtualMachinePowerStatePoweredOn {
				continue
			}
			ip, ok := vmIPv4(vm)
			if !ok {
				log.FromContext(ctx).V(1).Info("powered-on VM without an IPv4 address: no kubelet", "vm", vm.Name)
				continue
			}
			listen, ok := peer.Translate(ip)
			if !ok {
				log.FromContext(ctx).Info("VM address outside the network load balancers reach: no kubelet", "vm", vm.Name, "address", ip.String(), "network", peer.Network.String())
				continue
			}
			out = append(out, machine{
				ID: vm.UUID,
				Kubelet: Kubelet{
					Name: vm.Name, IP: ip.String(), ListenIP: listen.String(),
					SystemUUID: strings.ToUpper(vm.UUID),
				},
				What: fmt.Sprintf("VM %s (%s, %s; node agent on %s)", vm.Name, vm.Zone, ip, listen),
				Gone: "VM " + vm.Name + " powered off or destroyed",
			})
		}
		return out, nil
	}
}

// vmIPv4 returns the first IPv4 address the VM's guest reports.
func vmIPv4(vm vcsim.VM) (netip.Addr, bool) {
	for _, nic := range vm.Guest.NICs {
		for _, s := range nic.IPs {
			if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}
