package devenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/vcsim"
)

// Run starts the dev environment and keeps it running until ctx is done
// (Ctrl-C), then stops every process it started. Every option is checked
// before anything starts: a bad one is an error naming its flag. Run returns
// early with an error when a component fails.
func Run(ctx context.Context, opts Options) error {
	if err := opts.defaults(); err != nil {
		return err
	}
	e := &env{opts: opts, out: opts.Out}
	return e.run(ctx)
}

// env is one running dev environment.
type env struct {
	opts  Options
	out   io.Writer
	ports Ports
	block int // the address block, X in 127.X.0.0/16
	cp    *ControlPlane
	// managerBin is the stratus-ccm binary, found once and restarted.
	managerBin string
	cloud      struct {
		url, token, tokenFile string
		client                *client.Client
	}
	// vc is the simulated vCenter of --cloud vsphere (else nil).
	vc *vcsim.Server
	// real is set with --real-nodes.
	real *realNodes
}

func (e *env) vsphere() bool { return e.opts.Cloud == CloudVSphere }

func (e *env) say(format string, args ...any) {
	fmt.Fprintf(e.out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (e *env) run(ctx context.Context) error {
	if err := os.MkdirAll(e.opts.StateDir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	unlock, err := lockStateDir(e.opts.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	logger, closeLog, err := fileLogger(filepath.Join(e.opts.StateDir, "logs", "stratus-dev.log"))
	if err != nil {
		return err
	}
	defer closeLog()
	ctx = log.IntoContext(ctx, logger)

	// Everything that can be wrong with the options or the state is found
	// before the first process starts.
	if err := checkCloud(e.opts.StateDir, e.opts.Cloud); err != nil {
		return err
	}
	if e.block, err = addressBlock(e.opts.StateDir, e.opts.AddressBlock); err != nil {
		return err
	}
	if e.ports, err = e.choosePorts(); err != nil {
		return err
	}
	if e.opts.RealNodes {
		rn, err := newRealNet(e.block)
		if err != nil {
			return err
		}
		e.real = &realNodes{net: rn, dir: filepath.Join(e.opts.StateDir, "real-nodes")}
	}
	bins, err := e.kubeBins(ctx)
	if err != nil {
		return err
	}
	if e.real != nil {
		if err := checkRealNodeHost(bins); err != nil {
			return err
		}
	}

	// Every component is stopped when run returns, in reverse start order,
	// even when ctx is already done (Ctrl-C).
	stopCtx := context.WithoutCancel(ctx)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	e.cp = &ControlPlane{Dir: e.opts.StateDir, BinDir: bins, Ports: e.ports, ControllerManager: true}
	if e.real != nil {
		e.say("creating the real nodes' network: router namespace %s, node network %s, pod network %s", e.real.net.router, e.real.net.nodeNet, e.real.net.podNet)
		if err := e.real.net.up(runCtx); err != nil {
			return err
		}
		defer e.real.net.down(stopCtx)
		unmark, err := markRealNodes(e.opts.StateDir)
		if err != nil {
			return err
		}
		defer unmark()
		e.cp.AdvertiseAddress = e.real.net.hostIP.String()
		e.cp.Scheduler = true
		e.cp.ClusterCIDR = e.real.net.podNet.String()
		e.real.cp, e.real.binDir = e.cp, bins
		e.say("starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler (logs in %s)", filepath.Join(e.opts.StateDir, "logs"))
	} else {
		e.say("starting etcd, kube-apiserver and kube-controller-manager (logs in %s)", filepath.Join(e.opts.StateDir, "logs"))
	}
	if err := e.cp.Start(runCtx); err != nil {
		return err
	}
	defer e.cp.Stop(stopCtx)
	if e.real != nil {
		if err := e.real.net.forward(e.ports.APIServer, net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.APIServer))); err != nil {
			return err
		}
	}
	failed := e.cp.Exited(runCtx)
	restCfg, err := e.cp.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}

	e.say("starting minicloud on %s", e.cloudAddr())
	cloud, err := e.startCloud(runCtx, logger.WithName("minicloud"))
	if err != nil {
		return err
	}
	defer func() { _ = cloud.stop() }()
	if e.real != nil {
		if err := e.real.net.forward(e.ports.Minicloud, e.cloudAddr()); err != nil {
			return err
		}
	}
	if e.openstack() {
		e.say("minicloud serves its OpenStack dialect at %s (Keystone, Nova, Neutron, Octavia)", OpenStackIdentityURL(e.cloud.url))
	}
	if e.vsphere() {
		e.say("starting a simulated vCenter on %s with %d VMs (vSphere machines; minicloud serves the load balancers)", e.vcenterAddr(), e.opts.Nodes)
		if e.vc, err = e.startVCenter(runCtx); err != nil {
			return err
		}
		defer e.vc.Close()
	}
	waitControl, err := e.serveControl(runCtx, cloud)
	if err != nil {
		return err
	}
	defer func() { cancel(); waitControl() }()

	if e.openstack() {
		if err := e.writeOpenStackConfig(runCtx); err != nil {
			return err
		}
	}
	if err := e.writeEnvFile(); err != nil {
		return err
	}
	var nodes []string
	if e.vsphere() {
		if err := e.deleteStaleNodes(runCtx, cs, e.vc); err != nil {
			return err
		}
		nodes, err = poweredOnVMs(runCtx, e.vc)
	} else {
		nodes, err = e.ensureInstances(runCtx)
	}
	if err != nil {
		return err
	}

	n := &narrator{out: e.out, client: cs}
	narratorDone := make(chan struct{})
	go func() { defer close(narratorDone); n.run(runCtx) }()
	defer func() { cancel(); <-narratorDone }()

	// With real nodes stratus-ccm is installed from the chart below, once
	// the images its pods run are built.
	switch {
	case e.real != nil && !e.opts.NoManager:
	case !e.opts.NoManager:
		// The first start must succeed (bad flags or configuration end
		// stratus dev); later exits are restarted, so killing the manager is
		// a fault drill, not the end of the environment.
		mgr, err := e.startManager(runCtx)
		if err != nil {
			return err
		}
		sup := superviseManager(runCtx, mgr, e.launchManager, e.say)
		defer sup.stop(stopCtx, stopGrace)
	default:
		if err := e.writeManagerArgs(); err != nil {
			return err
		}
	}

	stopPrometheus, err := e.startPrometheus(runCtx, cs)
	if err != nil {
		return err
	}
	defer stopPrometheus()

	f := &fleet{list: minicloudMachines(e.cloud.client), client: cs, say: e.say}
	if e.vsphere() {
		f.list = vsphereMachines(e.vc, peerNetwork(e.block))
	}
	if e.real != nil {
		e.say("building the images the real nodes import (pause, agnhost, stratus-ccm, coredns)")
		if err := e.real.prepare(runCtx, e.opts.RepoRoot, e.opts.ManagerBinary); err != nil {
			return err
		}
		f.list = e.real.machines(e.cloud.client, cs)
		e.say("deploying the cluster DNS: CoreDNS %s in %s behind Service kube-dns (%s)", coreDNSVersion, metav1.NamespaceSystem, ClusterDNS)
		if err := deployClusterDNS(runCtx, cs); err != nil {
			return err
		}
		if !e.opts.NoManager {
			if err := e.installChart(runCtx); err != nil {
				return err
			}
		}
	}
	fleetDone := make(chan struct{})
	go func() { defer close(fleetDone); f.run(runCtx) }()
	defer func() { cancel(); <-fleetDone }()

	if err := waitNodesRegistered(runCtx, cs, nodes, failed); err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C while starting
		}
		return err
	}
	e.summary(nodes)
	fmt.Fprintln(e.out, ReadyLine)

	select {
	case <-ctx.Done():
		if e.vsphere() {
			e.say("stopping (Ctrl-C): kubelets, manager, vcsim, minicloud, control plane")
		} else {
			e.say("stopping (Ctrl-C): kubelets, manager, minicloud, control plane")
		}
		return nil
	case err := <-failed:
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(e.opts.StateDir, "logs"))
	}
}

func (e *env) summary(nodes []string) {
	w := e.out
	fmt.Fprintf(w, "\nstratus dev is running (state in %s)\n", e.opts.StateDir)
	fmt.Fprintf(w, "  kube-apiserver  %s   kubeconfig %s\n", e.cp.APIServerURL(), e.cp.KubeconfigPath())
	if e.vsphere() {
		fmt.Fprintf(w, "  vcsim           %s   simulated vCenter, user %s, CA %s (outage drills: bin/stratus dev vcsim stop|start|hang)\n", e.vc.URL(), e.vc.Username(), e.vc.CAFile())
		fmt.Fprintf(w, "  minicloud       %s   load balancers only, reaching the VMs' network %s via %s; token in %s (bin/stratus dev minicloud stop|start|hang)\n",
			e.cloud.url, vmNetwork, peerNetwork(e.block).Via, e.cloud.tokenFile)
	} else {
		fmt.Fprintf(w, "  minicloud       %s   token in %s (outage drills: bin/stratus dev minicloud stop|start|hang)\n", e.cloud.url, e.cloud.tokenFile)
	}
	if e.openstack() {
		fmt.Fprintf(w, "  openstack       %s   minicloud's OpenStack dialect (Keystone, Nova, Neutron, Octavia); password: the minicloud token\n", OpenStackIdentityURL(e.cloud.url))
	}
	switch {
	case e.opts.NoManager:
		fmt.Fprintf(w, "  stratus-ccm     not started (--no-manager)\n")
	case e.real != nil:
		fmt.Fprintf(w, "  stratus-ccm     %s\n", e.realManagerLine())
	case e.vsphere():
		fmt.Fprintf(w, "  stratus-ccm     health/metrics on https://127.0.0.1:%d; nodes from vsphere, load balancers from minicloud, no routes (%s)\n", e.ports.Manager, e.managerConfigPath())
	case e.openstack():
		fmt.Fprintf(w, "  stratus-ccm     health/metrics on https://127.0.0.1:%d; provider openstack (%s): nodes from Nova, Octavia load balancers with floating IPs, pod-CIDR routes on router minicloud\n", e.ports.Manager, e.openstackConfigPath())
	default:
		fmt.Fprintf(w, "  stratus-ccm     health/metrics on https://127.0.0.1:%d\n", e.ports.Manager)
	}
	if e.real != nil {
		fmt.Fprintf(w, "  nodes           %s (%s)\n", strings.Join(nodes, ", "), realNodeSummary(e.real))
	} else if e.vsphere() {
		fmt.Fprintf(w, "  nodes           %s (simulated kubelets, one per powered-on VM; NodePorts answer on the loopback counterpart of each VM's IP)\n", strings.Join(nodes, ", "))
	} else if e.openstack() {
		fmt.Fprintf(w, "  nodes           %s (simulated kubelets of minicloud instances, which are the Nova servers; NodePorts answer on each instance's private IP)\n", strings.Join(nodes, ", "))
	} else {
		fmt.Fprintf(w, "  nodes           %s (simulated kubelets; NodePorts answer on each instance's private IP)\n", strings.Join(nodes, ", "))
	}
	fmt.Fprintf(w, "  logs            %s\n", e.cp.LogDir())
	fmt.Fprintf(w, "\nNext, in another terminal:\n")
	fmt.Fprintf(w, "  source %s\n", filepath.Join(e.opts.StateDir, EnvFile))
	kubectl := "kubectl"
	if p := filepath.Join(e.cp.BinDir, "kubectl"); fileExists(p) {
		kubectl = p
	}
	fmt.Fprintf(w, "  %s get nodes -o wide\n", kubectl)
	fmt.Fprintf(w, "  %s create service loadbalancer web --tcp=80:8080 && %s get service web -w\n", kubectl, kubectl)
	if e.vsphere() {
		vm := "node-0"
		if len(nodes) > 0 {
			vm = nodes[len(nodes)-1]
		}
		fmt.Fprintf(w, "  bin/stratus vcsim vm list\n")
		fmt.Fprintf(w, "  bin/stratus vcsim vm power-off %s   # NotReady, then the shutdown taint; power-on brings it back\n", vm)
		fmt.Fprintf(w, "  bin/stratus vcsim vm destroy %s     # leaves the load balancers; the node is deleted once its VM has been missing for %s and the deletion guard's next check confirms it: about 30-35 s after NotReady\n", vm, NodeDeletionGracePeriod)
		fmt.Fprintf(w, "  bin/stratus vcsim vm create extra      # a new VM: its kubelet joins\n")
	} else {
		fmt.Fprintf(w, "  bin/stratus minicloud instances create extra --tag %s=%s\n", NodeTagKey, NodeTagValue)
	}
	if e.openstack() {
		fmt.Fprintf(w, "  openstack server list; openstack loadbalancer list   # with python-openstackclient, if installed\n")
	}
	fmt.Fprintf(w, "  bin/stratus dev demo     # walks through the whole story\n\n")
}

// waitNodesRegistered waits until every named node exists, or a component
// fails.
func waitNodesRegistered(ctx context.Context, cs kubernetes.Interface, names []string, failed <-chan error) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	deadline := time.NewTimer(3 * time.Minute)
	defer deadline.Stop()
	for {
		missing := 0
		for _, n := range names {
			if _, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err != nil {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-failed:
			return err
		case <-deadline.C:
			return fmt.Errorf("%d of %d nodes did not register within 3m", missing, len(names))
		case <-t.C:
		}
	}
}
