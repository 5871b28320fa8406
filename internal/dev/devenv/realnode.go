package devenv

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// realNode is one real node: a network namespace on the environment's
// bridge with containerd, a kubelet (--cloud-provider=external) and
// kube-proxy in it, its pods' processes under a cgroup subtree of its own,
// and everything it writes under dir.
type realNode struct {
	name string
	ip   netip.Addr
	net  *realNet
	// dir holds the node's state: containerd's root and state, the
	// kubelet's root and certificates, the CNI configuration and IPAM data,
	// pod logs, the configuration files.
	dir string
	// binDir holds kubelet, kube-proxy, containerd, its shim and ctr.
	binDir string
	// logDir receives <node>-containerd.log, -kubelet.log, -kube-proxy.log.
	logDir string

	procs []*process
}

// cgroupHierarchies are the cgroup v1 hierarchies a kubelet with the
// cgroupfs driver uses; its cgroupRoot must exist in each before it starts.
var cgroupHierarchies = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"}

// cgroupFS is where the hierarchies are mounted.
const cgroupFS = "/sys/fs/cgroup"

func (n *realNode) netns() string      { return n.net.nodeNetns(n.name) }
func (n *realNode) cgroupRoot() string { return "/" + n.netns() }
func (n *realNode) sock() string       { return filepath.Join(n.dir, "containerd.sock") }
func (n *realNode) cniConfDir() string { return filepath.Join(n.dir, "cni", "net.d") }

// vethName is the router's side of the node's link, named for the node's
// address (interface names are at most 15 bytes).
func (n *realNode) vethName() string {
	b := n.ip.As4()
	return "v" + strconv.Itoa(int(b[3]))
}

// start creates the node's namespace and cgroups and starts containerd
// (importing images), the kubelet and kube-proxy. kubeconfigs are the
// kubelet's and kube-proxy's, written by the caller.
func (n *realNode) start(ctx context.Context, images []string, kubeletKubeconfig, proxyKubeconfig, caFile string) (err error) {
	defer func() {
		if err != nil {
			n.stop(context.WithoutCancel(ctx))
		}
	}()
	// What a crashed earlier run of this node left (processes in its
	// cgroups, mounts, the namespace) goes first.
	n.stop(ctx)
	if err := n.plumb(ctx); err != nil {
		return err
	}
	if err := n.makeCgroups(); err != nil {
		return err
	}
	for _, d := range []string{n.cniConfDir(), filepath.Join(n.dir, "pod-logs"), n.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	for _, img := range images {
		if _, err := runCmd(ctx, filepath.Join(n.binDir, "ctr"), "--address", n.sock(), "--namespace", "k8s.io", "images", "import", img); err != nil {
			return fmt.Errorf("node %s: import image: %w", n.name, err)
		}
	}
	if err := n.startKubelet(kubeletKubeconfig, caFile); err != nil {
		return err
	}
	return n.startKubeProxy(proxyKubeconfig)
}

// plumb creates the node's namespace with eth0 on the router's bridge, the
// node's address and a default route via the router.
func (n *realNode) plumb(ctx context.Context) error {
	ns, veth := n.netns(), n.vethName()
	_ = runIP(ctx, "netns", "del", ns)
	_ = runIP(ctx, "-n", n.net.router, "link", "del", veth)
	steps := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", n.net.router, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", n.net.router, "link", "set", veth, "master", "br0"},
		{"-n", n.net.router, "link", "set", veth, "up"},
		{"-n", ns, "addr", "add", n.ip.String() + "/" + strconv.Itoa(n.net.nodeNet.Bits()), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", "default", "via", n.net.gateway.String()},
	}
	for _, args := range steps {
		if err := runIP(ctx, args...); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	// Pods' traffic is forwarded by the node; bridged pod traffic passes
	// kube-proxy's rules.
	if err := nsSysctl(ctx, ns, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
		if err := nsSysctl(ctx, ns, "net.bridge.bridge-nf-call-iptables", "1"); err != nil {
			return err
		}
	}
	return nil
}

// makeCgroups creates the node's cgroupRoot in every hierarchy, with the
// cpuset's CPUs and memory nodes of the parent (an empty cpuset takes no
// process).
func (n *realNode) makeCgroups() error {
	for _, h := range cgroupHierarchies {
		dir := filepath.Join(cgroupFS, h, n.cgroupRoot())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("node %s: cgroup %s: %w", n.name, dir, err)
		}
		if h != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(cgroupFS, h, f))
			if err != nil {
				return fmt.Errorf("node %s: %w", n.name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("node %s: %w", n.name, err)
			}
		}
	}
	return nil
}

// launch starts bin in the node's namespace, inside the node's pids cgroup
// (so that stopping the node finds every process it left, containerd's
// shims among them), logging to <logDir>/<node>-<name>.log.
func (n *realNode) launch(name, bin string, args []string, env []string) (*process, error) {
	procs := filepath.Join(cgroupFS, "pids", n.cgroupRoot(), "cgroup.procs")
	wrapper := append([]string{"--net=/run/netns/" + n.netns(), "--", "sh", "-c", `echo $$ > "$0" && exec "$@"`, procs, bin}, args...)
	p, err := startProcess(n.name+" "+name, "nsenter", wrapper, env, filepath.Join(n.logDir, n.name+"-"+name+".log"))
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

// containerdConfig is containerd 2.x's configuration for a node: its own
// root, state, socket, runc state and opt folder, and no NRI socket (all of
// which default to paths of the machine's); CNI from the node's folder; and
// what this kind of machine needs: no negative OOM score adjustment (no
// CAP_SYS_RESOURCE) and pod network namespaces mounted under the node's
// state. Only the shims' sockets are always in /run/containerd/s (root's
// fixed place): stop removes the node's.
const containerdConfig = `version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[5]q]
    conf_dir = %[6]q
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    SystemdCgroup = false
    BinaryName = %[8]q
    Root = %[9]q

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.internal.v1.opt']
  path = %[10]q

[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[7]q

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
`

func (n *realNode) startContainerd(ctx context.Context) error {
	runc, err := exec.LookPath("runc")
	if err != nil {
		return fmt.Errorf("%w runc (Debian package runc)", errRealNodes)
	}
	cfg := fmt.Sprintf(containerdConfig,
		filepath.Join(n.dir, "containerd", "root"), filepath.Join(n.dir, "containerd", "state"),
		n.sock(), n.sock()+".ttrpc", cniBinDir, n.cniConfDir(), pauseImage, runc,
		filepath.Join(n.dir, "containerd", "runc"), filepath.Join(n.dir, "containerd", "opt"))
	path := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	env := []string{"PATH=" + n.binDir + ":" + os.Getenv("PATH")}
	p, err := n.launch("containerd", filepath.Join(n.binDir, "containerd"), []string{"--config", path}, env)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited():
			return false, p.exitErr()
		default:
		}
		_, err := os.Stat(n.sock())
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: wait for containerd (see its log): %w", n.name, err)
	}
	return nil
}

// kubeletConfig is the kubelet's configuration on this kind of machine
// (cgroup v1, cgroupfs, a root of its own), with eviction and image garbage
// collection that do not act on a shared disk, no resolver of the
// machine's (pods get no upstream name server) and the cluster DNS.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
containerRuntimeEndpoint: %[2]q
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[3]q
authorization:
  mode: Webhook
resolvConf: ""
clusterDNS: [%[5]q]
clusterDomain: %[6]q
podLogsDir: %[4]q
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
serializeImagePulls: false
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
`

func (n *realNode) startKubelet(kubeconfig, caFile string) error {
	cfg := fmt.Sprintf(kubeletConfig, n.cgroupRoot(), "unix://"+n.sock(), caFile, filepath.Join(n.dir, "pod-logs"), ClusterDNS, ClusterDomain)
	path := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	_, err := n.launch("kubelet", filepath.Join(n.binDir, "kubelet"), []string{
		"--config=" + path,
		"--kubeconfig=" + kubeconfig,
		"--cloud-provider=external",
		"--hostname-override=" + n.name,
		"--node-ip=" + n.ip.String(),
		"--root-dir=" + filepath.Join(n.dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.dir, "kubelet-pki"),
		"--v=1",
	}, nil)
	return err
}

// kubeProxyConfig runs kube-proxy in nftables mode (the namespace's own
// tables; no iptables binaries involved) and leaves the conntrack sysctls,
// some of which are the machine's, as they are.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %[1]q
hostnameOverride: %[2]q
bindAddress: %[3]q
clusterCIDR: %[4]q
healthzBindAddress: 0.0.0.0:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`

func (n *realNode) startKubeProxy(kubeconfig string) error {
	cfg := fmt.Sprintf(kubeProxyConfig, kubeconfig, n.name, n.ip.String(), n.net.podNet.String())
	path := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	_, err := n.launch("kube-proxy", filepath.Join(n.binDir, "kube-proxy"), []string{"--config=" + path, "--v=1"}, nil)
	return err
}

// writeCNIConfig gives the node's pods addresses of podCIDR on a bridge of
// the node's own, with no masquerading: traffic to another node's pods
// leaves with the pod's address and finds its way only through the cloud's
// routes.
func (n *realNode) writeCNIConfig(podCIDR string) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "stratus",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(n.dir, "cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(n.cniConfDir(), "10-stratus.conflist")
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	return os.Rename(path+".tmp", path)
}

// stop ends the node as a power-off would: every process it ran (the
// kubelet, kube-proxy, containerd, its shims and the pods' processes) is
// killed, then its mounts, cgroups and namespace are removed. The node's
// state folder stays (a restarted node keeps its pods' images).
func (n *realNode) stop(ctx context.Context) {
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].stop(ctx, 2*time.Second)
	}
	n.procs = nil
	killCgroup(ctx, filepath.Join(cgroupFS, "pids", n.cgroupRoot()))
	n.removeShimSockets()
	unmountUnder(n.dir)
	for _, h := range append(slices.Clone(cgroupHierarchies), "unified") {
		removeCgroupTree(filepath.Join(cgroupFS, h, n.cgroupRoot()))
	}
	_ = runIP(ctx, "netns", "del", n.netns())
	_ = runIP(ctx, "-n", n.net.router, "link", "del", n.vethName())
}

// removeShimSockets removes the sockets of the node's containerd shims,
// which a killed shim leaves in /run/containerd/s: each task's bundle names
// its shim's socket in a file "address" (unix:///run/containerd/s/<hash>).
func (n *realNode) removeShimSockets() {
	bundles, _ := filepath.Glob(filepath.Join(n.dir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "address"))
	for _, b := range bundles {
		addr, err := os.ReadFile(b)
		if err != nil {
			continue
		}
		path := strings.TrimPrefix(strings.TrimSpace(string(addr)), "unix://")
		if strings.HasPrefix(path, "/run/containerd/s/") {
			_ = os.Remove(path)
		}
	}
}

// killCgroup kills every process in a cgroup tree until none is left (a
// process forked meanwhile is found at the next look), for at most 10 s.
func killCgroup(ctx context.Context, dir string) {
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		pids := cgroupPids(dir)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(pids) == 0, nil
	})
}

// cgroupPids lists the processes of a cgroup tree.
func cgroupPids(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroupTree removes a cgroup and its children, deepest first.
func removeCgroupTree(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = syscall.Rmdir(dirs[i])
	}
}

// unmountUnder detaches every mount below dir (the kubelet's bind mount of
// its root, pod volumes, containerd's root filesystems and the pods'
// network namespaces), deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			continue
		}
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
