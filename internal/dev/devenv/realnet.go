package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// The network of real nodes, for address block B (the environment's):
//
//	host netns                    router netns "stratus-B-router"          node netns "stratus-B-<node>"
//	 srB (172.30.B.1/30) ── veth ── uplink (172.30.B.2/30)
//	                                 br0 (172.31.B.254/24) ── veth vN ─────── eth0 (172.31.B.N/24)
//	                                 10.B.x.0/24 via 172.31.B.N  (minicloud's routes)   cni0 10.B.x.1/24, pods
//	 local 172.30.B.128/25 (VIPs)    172.30.B.128/25 via 172.30.B.1                     default via 172.31.B.254
//
// The router is a namespace of its own so that forwarding is switched on
// there and never in the machine's own namespace. The host reaches the node
// network and the pod network through it (two routes of its own), so the
// API server reaches kubelets and minicloud's data plane reaches NodePorts;
// the nodes reach the API server and minicloud through forwarders listening
// on 172.30.B.1. The pod routes are minicloud's: it programs the routes the
// route controller creates in the router's table (minicloud.KernelRoutes),
// and nothing else routes a pod network.
//
// Load-balancer VIPs come from 172.30.B.128/25, a range routed to the host
// as a cloud routes its VIPs to its load balancers: the host's table holds
// the whole range as local addresses (no address per VIP), where
// minicloud's data plane binds its listeners, and the router sends the
// range to the host. So the nodes and their pods reach a VIP through the
// node network, with their own source addresses, as they would reach a
// cloud's load balancer (a VIP on loopback would be every pod's own).
type realNet struct {
	block int
	// router is the router's namespace name.
	router string
	// hostLink is the host side of the host–router link.
	hostLink string
	// hostIP and routerIP are the two ends of the link.
	hostIP, routerIP netip.Addr
	// nodeNet is the node network; gateway its router address.
	nodeNet netip.Prefix
	gateway netip.Addr
	// podNet is the cluster's pod network (node IPAM's cluster CIDR).
	podNet netip.Prefix
	// vipNet is minicloud's VIP pool, local to the host.
	vipNet netip.Prefix

	mu         sync.Mutex
	forwarders []net.Listener
}

// errRealNodes marks what the machine lacks for real nodes.
var errRealNodes = errors.New("real nodes need")

// newRealNet returns the addresses of block's network (nothing is created).
func newRealNet(block int) (*realNet, error) {
	if block == 96 {
		return nil, fmt.Errorf("--address-block 96: real nodes use 10.<block>.0.0/16 as the pod network, and 10.96.0.0/16 is the Service network")
	}
	b := byte(block)
	return &realNet{
		block:    block,
		router:   fmt.Sprintf("stratus-%d-router", block),
		hostLink: fmt.Sprintf("sr%d", block),
		hostIP:   netip.AddrFrom4([4]byte{172, 30, b, 1}),
		routerIP: netip.AddrFrom4([4]byte{172, 30, b, 2}),
		nodeNet:  netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 31, b, 0}), 24),
		gateway:  netip.AddrFrom4([4]byte{172, 31, b, 254}),
		podNet:   netip.PrefixFrom(netip.AddrFrom4([4]byte{10, b, 0, 0}), 16),
		vipNet:   netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 30, b, 128}), 25),
	}, nil
}

// instancePool is where minicloud gives real nodes' instances their private
// IPs: the lower half of the node network (.1 to .126), so that the router's
// address is never handed out.
func (n *realNet) instancePool() netip.Prefix {
	return netip.PrefixFrom(n.nodeNet.Addr(), 25)
}

// nodeNetns is the namespace of a node.
func (n *realNet) nodeNetns(node string) string {
	return fmt.Sprintf("stratus-%d-%s", n.block, node)
}

// checkRealNodeHost returns an error naming what the machine lacks for real
// nodes: root, the commands the environment runs, the kernel's namespaces.
func checkRealNodeHost(binDir string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w root (network namespaces, cgroups, mounts): run stratus dev --real-nodes as root", errRealNodes)
	}
	var missing []string
	for _, cmd := range []struct{ name, pkg string }{
		{"ip", "iproute2"}, {"nsenter", "util-linux"}, {"nft", "nftables"}, {"runc", "runc"},
	} {
		if _, err := exec.LookPath(cmd.name); err != nil {
			missing = append(missing, cmd.name+" (Debian package "+cmd.pkg+")")
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(cniBinDir + "/" + plugin); err != nil {
			missing = append(missing, cniBinDir+"/"+plugin+" (Debian package containernetworking-plugins)")
		}
	}
	for _, bin := range realNodeBinaries {
		if err := checkExecutable(binDir + "/" + bin); err != nil {
			missing = append(missing, binDir+"/"+bin+" (hack/kubebins/build.sh "+bin+")")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w %s", errRealNodes, strings.Join(missing, ", "))
	}
	if _, err := os.Stat("/sys/fs/cgroup/cpu"); err != nil {
		if _, err2 := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err2 == nil {
			return fmt.Errorf("%w cgroup v1 hierarchies under /sys/fs/cgroup (this machine has cgroup v2, which the environment does not drive yet)", errRealNodes)
		}
		return fmt.Errorf("%w cgroup hierarchies under /sys/fs/cgroup: %v", errRealNodes, err)
	}
	return nil
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// realNodeBinaries are the pinned binaries a real node runs.
var realNodeBinaries = []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr"}

// up creates the router, its bridge, the host link and the host's routes to
// the node and pod networks. What a crashed earlier run left is removed
// first.
func (n *realNet) up(ctx context.Context) error {
	n.down(ctx)
	plen := strconv.Itoa(n.nodeNet.Bits())
	steps := [][]string{
		{"netns", "add", n.router},
		{"-n", n.router, "link", "set", "lo", "up"},
		{"link", "add", n.hostLink, "type", "veth", "peer", "name", "uplink", "netns", n.router},
		{"addr", "add", n.hostIP.String() + "/30", "dev", n.hostLink},
		{"link", "set", n.hostLink, "up"},
		{"-n", n.router, "addr", "add", n.routerIP.String() + "/30", "dev", "uplink"},
		{"-n", n.router, "link", "set", "uplink", "up"},
		{"-n", n.router, "link", "add", "br0", "type", "bridge"},
		{"-n", n.router, "addr", "add", n.gateway.String() + "/" + plen, "dev", "br0"},
		{"-n", n.router, "link", "set", "br0", "up"},
		{"route", "replace", n.nodeNet.String(), "via", n.routerIP.String(), "dev", n.hostLink},
		{"route", "replace", n.podNet.String(), "via", n.routerIP.String(), "dev", n.hostLink},
		{"route", "replace", "local", n.vipNet.String(), "dev", "lo"},
		{"-n", n.router, "route", "replace", n.vipNet.String(), "via", n.hostIP.String()},
	}
	for _, args := range steps {
		if err := runIP(ctx, args...); err != nil {
			n.down(context.WithoutCancel(ctx))
			return fmt.Errorf("real-node network: %w", err)
		}
	}
	if err := nsSysctl(ctx, n.router, "net.ipv4.ip_forward", "1"); err != nil {
		n.down(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

// down removes the router namespace (its bridge and the veths to the nodes
// go with it, and so does the host link and its routes) and the host's
// local route of the VIPs. Errors are ignored: it also cleans up after a
// run that did not get as far.
func (n *realNet) down(ctx context.Context) {
	n.mu.Lock()
	for _, l := range n.forwarders {
		l.Close()
	}
	n.forwarders = nil
	n.mu.Unlock()
	_ = runIP(ctx, "link", "del", n.hostLink)
	_ = runIP(ctx, "netns", "del", n.router)
	_ = runIP(ctx, "route", "del", "local", n.vipNet.String(), "dev", "lo", "table", "local")
}

// forward listens on the host's address of the node network at port and
// forwards every connection to target (a loopback address of the API server
// or minicloud), until down.
func (n *realNet) forward(port int, target string) error {
	l, err := net.Listen("tcp", net.JoinHostPort(n.hostIP.String(), strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("forward %s:%d to %s: %w", n.hostIP, port, target, err)
	}
	n.mu.Lock()
	n.forwarders = append(n.forwarders, l)
	n.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go pipe(c, target)
		}
	}()
	return nil
}

// pipe copies between c and a new connection to target until either closes.
func pipe(c net.Conn, target string) {
	defer c.Close()
	t, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer t.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(t, c); closeWrite(t); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, t); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// runIP runs iproute2's ip.
func runIP(ctx context.Context, args ...string) error {
	_, err := runCmd(ctx, "ip", args...)
	return err
}

// runCmd runs a command and returns its output; a failure's error carries
// its standard error.
func runCmd(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// nsSysctl sets a sysctl inside a named network namespace (the net.*
// sysctls are per namespace), through nsenter so that /sys is left alone.
func nsSysctl(ctx context.Context, netns, key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	if _, err := runCmd(ctx, "nsenter", "--net=/run/netns/"+netns, "sh", "-c", "echo "+value+" > "+path); err != nil {
		return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, netns, err)
	}
	return nil
}
