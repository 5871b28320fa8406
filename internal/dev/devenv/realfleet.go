package devenv

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/minicloud/client"
)

// realNodeKubeBins are the pinned binaries --real-nodes needs beyond
// devKubeBins.
var realNodeKubeBins = []string{"kube-scheduler", "kubelet", "kube-proxy", "agnhost", "containerd", "containerd-shim-runc-v2", "ctr", "coredns", "helm"}

// realNodes is what an environment with real nodes shares between them.
type realNodes struct {
	net    *realNet
	cp     *ControlPlane
	binDir string
	// dir holds nodes/<name>/ (each node's state) and images/.
	dir string
	// images are the archives every node imports.
	images []string
	// proxyKubeconfig is kube-proxy's (one identity for every node).
	proxyKubeconfig string
}

// apiServerURL is where nodes reach the API server: the forwarder on the
// host's address of the node network.
func (r *realNodes) apiServerURL() string {
	return "https://" + netip.AddrPortFrom(r.net.hostIP, uint16(r.cp.Ports.APIServer)).String()
}

// prepare writes what every node shares: kube-proxy's kubeconfig and the
// images. managerBin, if set, is the stratus-ccm the image holds (it must be
// static); else one is built from repoRoot as the Dockerfile builds it.
func (r *realNodes) prepare(ctx context.Context, repoRoot, managerBin string) error {
	r.proxyKubeconfig = filepath.Join(r.dir, "kube-proxy.kubeconfig")
	if err := r.cp.WriteClientKubeconfig(r.proxyKubeconfig, "kube-proxy", kubeProxyUser, nil, r.apiServerURL(), ""); err != nil {
		return err
	}
	if repoRoot == "" {
		return fmt.Errorf("--real-nodes builds its images (pause, stratus-ccm) from the repository: run from the stratus repository")
	}
	imgDir := filepath.Join(r.dir, "images")
	pause, err := buildStatic(ctx, repoRoot, "./internal/dev/devenv/pause", imgDir)
	if err != nil {
		return err
	}
	proxyecho, err := buildStatic(ctx, repoRoot, "./internal/dev/devenv/proxyecho", imgDir)
	if err != nil {
		return err
	}
	if managerBin == "" {
		if managerBin, err = buildStatic(ctx, repoRoot, "./cmd/stratus-ccm", imgDir); err != nil {
			return err
		}
	} else if err := checkStatic(managerBin); err != nil {
		return fmt.Errorf("--manager-binary: %w", err)
	}
	specs, err := realNodeImages(pause, filepath.Join(r.binDir, "agnhost"), proxyecho, managerBin, filepath.Join(r.binDir, "coredns"))
	if err != nil {
		return err
	}
	r.images, err = buildImages(imgDir, specs)
	return err
}

// machines lists the running minicloud instances tagged as nodes, each
// to run as a real node at its private IP.
func (r *realNodes) machines(cloud *client.Client, cs kubernetes.Interface) func(context.Context) ([]machine, error) {
	list := minicloudMachines(cloud)
	return func(ctx context.Context) ([]machine, error) {
		ms, err := list(ctx)
		if err != nil {
			return nil, err
		}
		var out []machine
		for _, m := range ms {
			ip, err := netip.ParseAddr(m.Kubelet.IP)
			if err != nil || !r.net.nodeNet.Contains(ip) {
				log.FromContext(ctx).Info("instance is not on the real nodes' network; no node for it", "instance", m.ID, "ip", m.Kubelet.IP)
				continue
			}
			name := m.Kubelet.Name
			m.What = strings.TrimSuffix(m.What, ")") + "; kubelet, containerd and kube-proxy in network namespace " + r.net.nodeNetns(name) + ")"
			m.Gone += ": its processes and pods were killed"
			m.run = r.runNode(name, ip, cs)
			out = append(out, m)
		}
		return out, nil
	}
}

// runNode returns the life of one real node: started, its pod network
// configured once node IPAM gave it a range, and stopped as a machine
// powered off when ctx ends.
func (r *realNodes) runNode(name string, ip netip.Addr, cs kubernetes.Interface) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		n := &realNode{
			name: name, ip: ip, net: r.net, binDir: r.binDir,
			dir:    filepath.Join(r.dir, "nodes", name),
			logDir: r.cp.LogDir(),
		}
		kc := filepath.Join(n.dir, "kubelet.kubeconfig")
		if err := r.cp.WriteClientKubeconfig(kc, "node-"+name, nodeUserPrefix+name, []string{nodesGroup}, r.apiServerURL(), ""); err != nil {
			return err
		}
		if err := n.start(ctx, r.images, kc, r.proxyKubeconfig, r.cp.CAFile()); err != nil {
			return err
		}
		defer n.stop(context.WithoutCancel(ctx))
		// The node's pod network is configured once node IPAM has given
		// it a range, as a CNI daemon would; the kubelet reports the node
		// NotReady until then.
		err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || node.Spec.PodCIDR == "" {
				return false, nil
			}
			if err := n.writeCNIConfig(node.Spec.PodCIDR); err != nil {
				return false, err
			}
			return true, nil
		})
		if err != nil && ctx.Err() == nil {
			return err
		}
		// A node process that dies ends the node (the fleet starts it
		// again at its next pass), as a crashed machine would be replaced.
		exited := make(chan error, len(n.procs))
		for _, p := range n.procs {
			go func() {
				select {
				case <-p.exited():
					exited <- p.exitErr()
				case <-ctx.Done():
				}
			}()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-exited:
			return fmt.Errorf("node %s: %w (logs in %s)", name, err, r.cp.LogDir())
		}
	}
}

// realNodeSummary says where a real node's logs are.
func realNodeSummary(r *realNodes) string {
	return "real nodes: kubelet, containerd and kube-proxy (nftables) in network namespaces stratus-" + strconv.Itoa(r.net.block) + "-<node> on " + r.net.nodeNet.String() +
		"; pod network " + r.net.podNet.String() + " routed only by minicloud's routes"
}
