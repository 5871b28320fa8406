package devenv

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of `stratus dev`.
const (
	// DefaultStateDir holds everything a dev environment keeps.
	DefaultStateDir = ".stratus/dev"
	// DefaultNodes is how many nodes a new environment starts with.
	DefaultNodes = 3
	// NodeTagKey and NodeTagValue mark the minicloud instances that get a
	// simulated kubelet and join the cluster.
	NodeTagKey   = "stratus-dev"
	NodeTagValue = "node"
	// ClusterName is the --cluster-name of the manager.
	ClusterName = "stratus-dev"
	// ReadyLine is printed once the cluster, the cloud, the manager and the
	// first nodes are up.
	ReadyLine = "stratus dev: ready"
	// instanceType is the type of the instances stratus dev creates.
	instanceType = "mc.small"
	// NodeDeletionGracePeriod is how long a node must be NotReady before
	// stratus may delete it (--node-deletion-grace-period of the manager).
	NodeDeletionGracePeriod = 20 * time.Second
	// fleetPeriod is how often minicloud is asked which instances run.
	fleetPeriod = 2 * time.Second
)

// Options configure Run. Zero values take the defaults.
type Options struct {
	// StateDir holds the cluster (etcd data, certificates), the cloud's
	// database, kubeconfig, env and logs/. Default DefaultStateDir.
	StateDir string
	// Cloud is where the nodes' machines come from: CloudMinicloud
	// (default; minicloud instances), CloudOpenStack (the same instances as
	// Nova servers of minicloud's OpenStack dialect, managed through
	// Keystone, Nova, Neutron and Octavia by the openstack provider) or
	// CloudVSphere (VMs of a simulated vCenter in this process; minicloud
	// still serves the load balancers).
	Cloud string
	// Nodes is how many instances or VMs (and kubelets) the environment has
	// at least; existing instances are reused. Default DefaultNodes.
	Nodes int
	// PortBase, if set, is the first of the consecutive ports used (see
	// Ports); otherwise free ports are picked.
	PortBase int
	// AddressBlock is X in 127.X.0.0/16, the loopback block of the cloud's
	// instance IPs and VIPs; 0 = the saved one or one derived from StateDir.
	AddressBlock int
	// RepoRoot is the stratus repository, used to build the control-plane
	// binaries (hack/kubebins/build.sh) and stratus-ccm when needed.
	RepoRoot string
	// KubeBinDir holds etcd, kube-apiserver and kube-controller-manager; if
	// empty they are built (once) by hack/kubebins/build.sh in RepoRoot.
	KubeBinDir string
	// ManagerBinary is the stratus-ccm to run; if empty, the stratus-ccm
	// next to the running executable, else one built from RepoRoot.
	ManagerBinary string
	// RealNodes runs every node as a real one (--real-nodes): a kubelet,
	// containerd and kube-proxy in a network namespace of its own on a
	// bridge of the environment's, at its instance's private IP, with pods
	// whose cross-node traffic flows through minicloud's routes. Needs root
	// and the Debian packages hack/ci-packages.txt lists; only with the
	// minicloud cloud.
	RealNodes bool
	// NoManager runs everything but the manager (to run it yourself, e.g.
	// in a debugger, with the flags in <state-dir>/manager.args).
	NoManager bool
	// Prometheus starts a Prometheus (when installed) that scrapes the
	// manager and evaluates the monitoring mixin's rules.
	Prometheus bool
	// Out receives the readable stream: progress, what stratus did, the
	// summary and ReadyLine. Default os.Stdout.
	Out io.Writer
}

func (o *Options) defaults() error {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return fmt.Errorf("state dir %s: %w", o.StateDir, err)
	}
	o.StateDir = abs
	if o.Cloud == "" {
		o.Cloud = CloudMinicloud
	}
	if !slices.Contains(Clouds, o.Cloud) {
		return fmt.Errorf("--cloud %q: want one of %s", o.Cloud, strings.Join(Clouds, ", "))
	}
	if o.RealNodes && o.Cloud != CloudMinicloud {
		return fmt.Errorf("--real-nodes: only with --cloud %s (got --cloud %s)", CloudMinicloud, o.Cloud)
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.Nodes < 0 {
		return fmt.Errorf("--nodes %d: must not be negative", o.Nodes)
	}
	if o.PortBase != 0 && (o.PortBase < 1024 || o.PortBase+portCount > 65535) {
		return fmt.Errorf("--port-base %d: must be in [1024, %d]", o.PortBase, 65535-portCount)
	}
	if o.AddressBlock != 0 && (o.AddressBlock < 1 || o.AddressBlock > 254) {
		return fmt.Errorf("--address-block %d: must be in [1, 254] (X in 127.X.0.0/16)", o.AddressBlock)
	}
	if o.KubeBinDir != "" {
		for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
			if err := checkExecutable(filepath.Join(o.KubeBinDir, name)); err != nil {
				return fmt.Errorf("--kube-bin-dir %s: %w", o.KubeBinDir, err)
			}
		}
	}
	if o.ManagerBinary != "" {
		if err := checkExecutable(o.ManagerBinary); err != nil {
			return fmt.Errorf("--manager-binary: %w", err)
		}
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	return nil
}
