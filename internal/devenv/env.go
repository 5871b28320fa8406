package devenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/vcsim"
	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	mos "github.com/stratus-ccm/stratus/minicloud/openstack"
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
	// NoManager runs everything but the manager (to run it yourself, e.g.
	// in a debugger, with the flags in <state-dir>/manager.args).
	NoManager bool
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

// checkExecutable reports why path is not an executable file.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

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
	bins, err := e.kubeBins(ctx)
	if err != nil {
		return err
	}

	// Every component is stopped when run returns, in reverse start order,
	// even when ctx is already done (Ctrl-C).
	stopCtx := context.WithoutCancel(ctx)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	e.say("starting etcd, kube-apiserver and kube-controller-manager (logs in %s)", filepath.Join(e.opts.StateDir, "logs"))
	e.cp = &ControlPlane{Dir: e.opts.StateDir, BinDir: bins, Ports: e.ports, ControllerManager: true}
	if err := e.cp.Start(runCtx); err != nil {
		return err
	}
	defer e.cp.Stop(stopCtx)
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

	if !e.opts.NoManager {
		// The first start must succeed (bad flags or configuration end
		// stratus dev); later exits are restarted, so killing the manager is
		// a fault drill, not the end of the environment.
		mgr, err := e.startManager(runCtx)
		if err != nil {
			return err
		}
		sup := superviseManager(runCtx, mgr, e.launchManager, e.say)
		defer sup.stop(stopCtx, stopGrace)
	} else if err := e.writeManagerArgs(); err != nil {
		return err
	}

	f := &fleet{list: minicloudMachines(e.cloud.client), client: cs, say: e.say}
	if e.vsphere() {
		f.list = vsphereMachines(e.vc, peerNetwork(e.block))
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

// devKubeBins are the binaries of hack/kubebins the environment runs (kubectl
// for the commands it suggests). Only these are built: the others (helm, the
// upstream CCMs) are for tests and would add many minutes to a first run.
var devKubeBins = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}

// kubeBins returns the folder of the control-plane binaries, building them
// (with progress on the terminal) the first time.
func (e *env) kubeBins(ctx context.Context) (string, error) {
	if e.opts.KubeBinDir != "" {
		return e.opts.KubeBinDir, nil
	}
	if e.opts.RepoRoot == "" {
		return "", errors.New("control-plane binaries: run from the stratus repository or pass --kube-bin-dir")
	}
	script := filepath.Join(e.opts.RepoRoot, "hack", "kubebins", "build.sh")
	build := exec.CommandContext(ctx, script, devKubeBins...)
	build.Dir = e.opts.RepoRoot
	build.Stdout, build.Stderr = e.out, e.out
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build control-plane binaries (%s): %w", script, err)
	}
	dir, err := exec.CommandContext(ctx, script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%s --print-dir: %w", script, err)
	}
	return strings.TrimSpace(string(dir)), nil
}

// choosePorts returns --port-base's ports, else the previous run's ports
// when they are all free (so a restart keeps the addresses users have in
// their shells), else free ports. The choice is saved in <state-dir>/ports.json.
func (e *env) choosePorts() (Ports, error) {
	path := filepath.Join(e.opts.StateDir, "ports.json")
	var ports Ports
	if e.opts.PortBase != 0 {
		ports = PortsFrom(e.opts.PortBase)
		if busy := ports.busy(); len(busy) > 0 {
			return Ports{}, fmt.Errorf("--port-base %d: ports %v in use", e.opts.PortBase, busy)
		}
	} else if prev, err := os.ReadFile(path); err == nil && json.Unmarshal(prev, &ports) == nil && ports.allFree() {
		// reuse
	} else if ports, err = FreePorts(); err != nil {
		return Ports{}, err
	}
	data, err := json.Marshal(ports)
	if err != nil {
		return Ports{}, fmt.Errorf("save ports: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return Ports{}, fmt.Errorf("save ports: %w", err)
	}
	return ports, nil
}

// Address blocks: the second octet of the loopback /16 that holds an
// environment's instance IPs, public IPs and load-balancer VIPs. Blocks
// derived from the state dir are in [firstDerivedBlock, lastDerivedBlock];
// the blocks above are left for explicit use (the tests take them, so they
// never meet a developer's environment).
const (
	firstDerivedBlock = 200
	lastDerivedBlock  = 247
)

// addressBlock returns the environment's block: --address-block, else the
// one saved by an earlier start, else one derived from the state dir (so two
// environments on one machine most likely differ). The result is saved in
// <state-dir>/address-block: the cloud's stored addresses must stay valid.
func addressBlock(stateDir string, flag int) (int, error) {
	path := filepath.Join(stateDir, "address-block")
	block := flag
	if block == 0 {
		if raw, err := os.ReadFile(path); err == nil {
			block, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		}
	}
	if block == 0 {
		h := fnv.New32a()
		h.Write([]byte(stateDir))
		block = firstDerivedBlock + int(h.Sum32()%(lastDerivedBlock-firstDerivedBlock+1))
	}
	if block < 1 || block > 254 {
		return 0, fmt.Errorf("address block %d (from --address-block or %s): must be in [1, 254] (127.<block>.0.0/16)", block, path)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(block)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("save address block: %w", err)
	}
	return block, nil
}

// addressPools splits 127.<block>.0.0/16 into the instance, public and VIP
// pools.
func addressPools(block int) (instances, public, vips netip.Prefix) {
	octet := byte(block)
	instances = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, octet, 0, 0}), 18)
	public = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, octet, 64, 0}), 18)
	vips = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, octet, 128, 0}), 17)
	return instances, public, vips
}

// startCloud starts minicloud in this process, on the environment's port
// and state, as a cloudServer that the control socket can stop and start.
func (e *env) startCloud(ctx context.Context, logger logr.Logger) (*cloudServer, error) {
	dir := filepath.Join(e.opts.StateDir, "minicloud")
	token, tokenFile, err := loadOrCreateToken(dir)
	if err != nil {
		return nil, err
	}
	cfg := minicloud.DefaultConfig()
	cfg.StateDir = dir
	cfg.Tokens = []string{token}
	cfg.InstanceCIDR, cfg.PublicCIDR, cfg.VIPCIDR = addressPools(e.block)
	if e.vsphere() {
		// The instance pool's upper half is where the VMs' node agents
		// listen; load balancers reach the VMs' network there.
		peer := peerNetwork(e.block)
		cfg.InstanceCIDR = netip.PrefixFrom(cfg.InstanceCIDR.Addr(), peer.Via.Bits())
		cfg.PeerNetworks = []minicloud.PeerNetwork{peer}
	}
	cfg.Logger = logger
	cloud := &cloudServer{cfg: cfg, addr: e.cloudAddr(), log: logger, say: e.say, base: ctx}
	if e.openstack() {
		cloud.mount = mountOpenStack
	}
	if err := cloud.start(); err != nil {
		return nil, err
	}
	e.cloud.url = "http://" + cloud.addr
	e.cloud.token, e.cloud.tokenFile = token, tokenFile
	if e.cloud.client, err = client.New(e.cloud.url, token, client.WithUserAgent("stratus-dev")); err != nil {
		_ = cloud.stop()
		return nil, fmt.Errorf("minicloud client: %w", err)
	}
	return cloud, nil
}

// loadOrCreateToken returns the cloud's token from <dir>/token, creating it
// the first time (where `stratus minicloud` client commands also look).
func loadOrCreateToken(dir string) (token, path string, err error) {
	path = filepath.Join(dir, "token")
	if raw, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(raw)) != "" {
		return strings.TrimSpace(string(raw)), path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("minicloud token: %w", err)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("minicloud token: %w", err)
	}
	token = hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("minicloud token: %w", err)
	}
	return token, path, nil
}

// ensureInstances makes sure at least opts.Nodes instances carry the node
// tag, creating node-1, node-2, ... spread over the zones, and returns the
// names of the running ones.
func (e *env) ensureInstances(ctx context.Context) ([]string, error) {
	existing, err := e.cloud.client.ListInstances(ctx, client.ListOptions{Tags: map[string]string{NodeTagKey: NodeTagValue}})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	names := map[string]bool{}
	var running []string
	for _, in := range existing {
		names[in.Name] = true
		if in.State == api.InstanceRunning {
			running = append(running, in.Name)
		}
	}
	for i := 1; len(names) < e.opts.Nodes; i++ {
		name := "node-" + strconv.Itoa(i)
		if names[name] {
			continue
		}
		in, err := e.cloud.client.CreateInstance(ctx, api.InstanceCreate{
			Name: name, Type: instanceType, Zone: minicloud.Zones[(i-1)%len(minicloud.Zones)],
			Tags: map[string]string{NodeTagKey: NodeTagValue},
		}, client.WithIdempotencyKey(e.opts.StateDir+"/"+name))
		if err != nil {
			return nil, fmt.Errorf("create instance %s: %w", name, err)
		}
		e.say("minicloud: created instance %s (%s, %s, %s)", in.Name, in.ID, in.Zone, in.PrivateIP)
		names[name] = true
		running = append(running, in.Name)
	}
	sort.Strings(running)
	return running, nil
}

// managerArgs are the flags of stratus-ccm in the dev environment.
//
// With --cloud vsphere the providers are in the --config file (vsphere for
// nodes, minicloud for load balancers) and no provider programs routes:
// the VMs are not minicloud instances, which minicloud's routes point at.
// With --cloud openstack the openstack provider reads <state-dir>/cloud.conf
// and does nodes, load balancers and routes (the dialect's router).
func (e *env) managerArgs() []string {
	args := []string{"--kubeconfig=" + e.cp.KubeconfigPath()}
	switch {
	case e.vsphere():
		args = append(args, "--config="+e.managerConfigPath(), "--configure-cloud-routes=false")
	case e.openstack():
		args = append(args,
			"--cloud-provider=openstack",
			"--cloud-config="+e.openstackConfigPath(),
			"--config="+e.managerConfigPath(),
			"--configure-cloud-routes=true",
			"--route-reconciliation-period=5s",
		)
	default:
		args = append(args,
			"--cloud-provider=minicloud",
			"--cloud-config="+e.cloudConfigPath(),
			"--config="+e.managerConfigPath(),
			"--configure-cloud-routes=true",
			"--route-reconciliation-period=5s",
		)
	}
	return append(args,
		"--cluster-name="+ClusterName,
		"--cluster-cidr="+ClusterCIDR,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(e.ports.Manager),
		"--node-monitor-period=5s",
		// A deleted instance's node goes soon after it is NotReady (the
		// default 1m is for real clusters); keeps the demo snappy.
		"--node-deletion-grace-period="+NodeDeletionGracePeriod.String(),
	)
}

func (e *env) cloudConfigPath() string { return filepath.Join(e.opts.StateDir, "minicloud.yaml") }

func (e *env) managerConfigPath() string { return filepath.Join(e.opts.StateDir, "stratus-ccm.yaml") }

// managerConfig relaxes the node deletion budget (by default one deletion
// per 10 minutes in a small cluster), so deleting several instances in a
// row removes their nodes, as a newcomer trying things expects.
const managerConfig = `apiVersion: stratus.io/v1alpha1
kind: ManagerConfig
nodeLifecycle:
  deletionBudgetPercent: 100
  deletionBudgetMin: 100
  deletionBudgetWindow: 1m
`

// hybridProviders is the providers part of the manager's config with
// --cloud vsphere: the VMs' nodes from vsphere, load balancers from
// minicloud, no routes provider.
const hybridProviders = `providers:
- name: vsphere
  type: vsphere
  cloudConfigFile: %s
- name: minicloud
  type: minicloud
  cloudConfigFile: %s
defaultNodeProvider: vsphere
defaultLoadBalancerProvider: minicloud
`

// writeCloudConfig writes the minicloud provider's cloud-config (where
// minicloud is and the file holding its token, never the token itself) and
// the manager's config file. (--cloud openstack's cloud.conf is written by
// writeOpenStackConfig, from the running cloud.)
func (e *env) writeCloudConfig() error {
	body := fmt.Sprintf("url: %s\ntokenFile: %s\n", e.cloud.url, e.cloud.tokenFile)
	config := managerConfig
	if e.vsphere() {
		// The vSphere nodes are no minicloud instances: load balancers
		// send their traffic to the nodes' InternalIPs.
		body += "foreignNodes: internalIP\n"
		config += fmt.Sprintf(hybridProviders, e.vsphereConfigPath(), e.cloudConfigPath())
	}
	if err := os.WriteFile(e.cloudConfigPath(), []byte(body), 0o644); err != nil {
		return fmt.Errorf("write cloud-config: %w", err)
	}
	if err := os.WriteFile(e.managerConfigPath(), []byte(config), 0o644); err != nil {
		return fmt.Errorf("write manager config: %w", err)
	}
	return nil
}

func (e *env) writeManagerArgs() error {
	if err := e.writeCloudConfig(); err != nil {
		return err
	}
	path := filepath.Join(e.opts.StateDir, "manager.args")
	if err := os.WriteFile(path, []byte(strings.Join(e.managerArgs(), "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	e.say("manager not started (--no-manager); run: stratus-ccm $(cat %s)", path)
	return nil
}

func (e *env) startManager(ctx context.Context) (*process, error) {
	bin, err := e.managerBinary(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.writeCloudConfig(); err != nil {
		return nil, err
	}
	e.managerBin = bin
	e.say("starting stratus-ccm (%s)", bin)
	p, err := e.launchManager()
	if err != nil {
		return nil, err
	}
	logPath := e.managerLog()
	// Serving its health endpoint means its flags and configuration were
	// accepted (it validates them before serving).
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed serving cert; /healthz only
	if err := waitHTTP(ctx, p, hc, "https://127.0.0.1:"+strconv.Itoa(e.ports.Manager)+"/healthz", "stratus-ccm"); err != nil {
		p.stop(context.WithoutCancel(ctx), stopGrace)
		return nil, fmt.Errorf("%w\n%s", err, tailFile(logPath, 5))
	}
	return p, nil
}

func (e *env) managerLog() string { return filepath.Join(e.cp.LogDir(), "stratus-ccm.log") }

// launchManager starts the manager binary startManager found; its output
// is appended to logs/stratus-ccm.log.
func (e *env) launchManager() (*process, error) {
	env := []string{"MINICLOUD_URL=" + e.cloud.url, "MINICLOUD_TOKEN_FILE=" + e.cloud.tokenFile}
	return startProcess("stratus-ccm", e.managerBin, e.managerArgs(), env, e.managerLog())
}

// tailFile returns the last n lines of a log, indented, for error messages.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + path + ":\n    " + strings.Join(lines, "\n    ")
}

// managerBinary finds stratus-ccm: the option, next to this executable
// (make dev builds both into bin/), or built from the repository.
func (e *env) managerBinary(ctx context.Context) (string, error) {
	if e.opts.ManagerBinary != "" {
		return e.opts.ManagerBinary, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "stratus-ccm")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if e.opts.RepoRoot == "" {
		return "", errors.New("stratus-ccm not found next to stratus; pass --manager-binary or run from the repository")
	}
	out := filepath.Join(e.opts.StateDir, "bin", "stratus-ccm")
	e.say("building stratus-ccm into %s", out)
	build := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/stratus-ccm")
	build.Dir = e.opts.RepoRoot
	build.Stdout, build.Stderr = e.out, e.out
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build stratus-ccm: %w", err)
	}
	return out, nil
}

// EnvFile is the name of the shell file in the state dir that points
// kubectl and the minicloud commands at the environment.
const EnvFile = "env"

func (e *env) writeEnvFile() error {
	body := fmt.Sprintf("export KUBECONFIG=%s\nexport MINICLOUD_URL=%s\nexport MINICLOUD_TOKEN=%s\n",
		shellQuote(e.cp.KubeconfigPath()), shellQuote(e.cloud.url), shellQuote(e.cloud.token))
	if e.vsphere() {
		// `stratus vcsim vm ...` reads its server from this state dir;
		// govc takes the GOVC_ variables.
		body += fmt.Sprintf("export %s=%s\nexport GOVC_URL=%s\nexport GOVC_USERNAME=%s\nexport GOVC_PASSWORD=%s\nexport GOVC_TLS_CA_CERTS=%s\n",
			vcsim.StateDirEnv, shellQuote(e.vcenterDir()), shellQuote(e.vc.URL().String()),
			shellQuote(e.vc.Username()), shellQuote(e.vc.Password()), shellQuote(e.vc.CAFile()))
	}
	if e.openstack() {
		// The python-openstackclient's variables: `openstack server list`
		// and friends talk to the dialect.
		body += fmt.Sprintf("export OS_AUTH_URL=%s\nexport OS_USERNAME=stratus-dev\nexport OS_PASSWORD=%s\nexport OS_USER_DOMAIN_NAME=%s\nexport OS_PROJECT_NAME=%s\nexport OS_PROJECT_DOMAIN_NAME=%s\nexport OS_REGION_NAME=%s\n",
			shellQuote(OpenStackIdentityURL(e.cloud.url)), shellQuote(e.cloud.token), mos.DomainName, mos.ProjectName, mos.DomainName, minicloud.Region)
	}
	path := filepath.Join(e.opts.StateDir, EnvFile)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (e *env) summary(nodes []string) {
	w := e.out
	fmt.Fprintf(w, "\nstratus dev is running (state in %s)\n", e.opts.StateDir)
	fmt.Fprintf(w, "  kube-apiserver  %s   kubeconfig %s\n", e.cp.APIServerURL(), e.cp.KubeconfigPath())
	if e.vsphere() {
		fmt.Fprintf(w, "  vcsim           %s   simulated vCenter, user %s, CA %s (stop/start it: bin/stratus dev vcsim stop|start)\n", e.vc.URL(), e.vc.Username(), e.vc.CAFile())
		fmt.Fprintf(w, "  minicloud       %s   load balancers only, reaching the VMs' network %s via %s; token in %s (bin/stratus dev minicloud stop|start)\n",
			e.cloud.url, vmNetwork, peerNetwork(e.block).Via, e.cloud.tokenFile)
	} else {
		fmt.Fprintf(w, "  minicloud       %s   token in %s (stop/start it: bin/stratus dev minicloud stop|start)\n", e.cloud.url, e.cloud.tokenFile)
	}
	if e.openstack() {
		fmt.Fprintf(w, "  openstack       %s   minicloud's OpenStack dialect (Keystone, Nova, Neutron, Octavia); password: the minicloud token\n", OpenStackIdentityURL(e.cloud.url))
	}
	switch {
	case e.opts.NoManager:
		fmt.Fprintf(w, "  stratus-ccm     not started (--no-manager)\n")
	case e.vsphere():
		fmt.Fprintf(w, "  stratus-ccm     health/metrics on https://127.0.0.1:%d; nodes from vsphere, load balancers from minicloud, no routes (%s)\n", e.ports.Manager, e.managerConfigPath())
	case e.openstack():
		fmt.Fprintf(w, "  stratus-ccm     health/metrics on https://127.0.0.1:%d; provider openstack (%s): nodes from Nova, Octavia load balancers with floating IPs, no routes\n", e.ports.Manager, e.openstackConfigPath())
	default:
		fmt.Fprintf(w, "  stratus-ccm     health/metrics on https://127.0.0.1:%d\n", e.ports.Manager)
	}
	if e.vsphere() {
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
		fmt.Fprintf(w, "  bin/stratus vcsim vm destroy %s     # leaves the load balancers; node deleted %s after NotReady\n", vm, NodeDeletionGracePeriod)
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

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ErrStateDirInUse means another stratus dev runs on the same state dir.
var ErrStateDirInUse = errors.New("state dir in use by another stratus dev")

// lockStateDir takes an exclusive lock on <dir>/lock for the life of this
// process (the kernel drops it if the process dies), so a second stratus dev
// on the same state fails clearly instead of fighting over etcd's data.
func lockStateDir(dir string) (func(), error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("%s (pid %s): %w", dir, strings.TrimSpace(string(owner)), ErrStateDirInUse)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}
