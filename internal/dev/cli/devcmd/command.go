// Package devcmd is the `stratus dev` command tree: the command itself runs the
// local environment (internal/dev/devenv) until Ctrl-C, `demo` walks through it,
// and `minicloud` and `vcsim` stop and start its clouds for outage drills.
package devcmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/internal/dev/repo"
)

// NewCommand returns `stratus dev`: the one-command local environment,
// `stratus dev demo`, the guided tour against it, and `stratus dev
// minicloud|vcsim`, which stop and start its clouds.
func NewCommand() *cobra.Command {
	opts := devenv.Options{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run stratus on a local cluster and cloud (etcd, kube-apiserver, kube-controller-manager, minicloud, stratus-ccm, simulated kubelets)",
		Long: `dev starts a complete local environment and keeps it running until Ctrl-C:
etcd, kube-apiserver and kube-controller-manager (built once by hack/kubebins),
minicloud, the stratus-ccm manager configured for it, and --nodes simulated
kubelets backed by minicloud instances. With --cloud openstack minicloud also
serves its OpenStack dialect (Keystone, Nova, Neutron, Octavia) and stratus-ccm
runs the openstack provider with a generated <state-dir>/cloud.conf: the same
instances are its Nova servers, each load balancer is an Octavia one with a
floating IP, and each node's pod CIDR is an extra route of router minicloud. With --cloud vsphere the machines
are VMs of a simulated vCenter (vcsim, driven with "stratus vcsim vm ...") and
minicloud serves only the load balancers. It writes <state-dir>/kubeconfig and
<state-dir>/env, logs each component under <state-dir>/logs, prints what
stratus does, and prints "` + devenv.ReadyLine + `" once the nodes are registered.
A manager that exits is restarted (with a backoff); "stratus dev minicloud
stop|start|hang" (and "stratus dev vcsim stop|start|hang") take a cloud down,
up, or make it hang, for outage drills. Starting it again
reuses the state. See docs/dev.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			// Outside the repository devenv needs the binaries named by flags.
			opts.RepoRoot, _ = repo.Root()
			return devenv.Run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.StateDir, "state-dir", devenv.DefaultStateDir, "where the cluster, the cloud, kubeconfig, env and logs are kept")
	f.StringVar(&opts.Cloud, "cloud", devenv.CloudMinicloud, "where the nodes' machines come from: "+strings.Join(devenv.Clouds, ", ")+" (openstack: minicloud's OpenStack dialect and the openstack provider; vsphere: a simulated vCenter, load balancers from minicloud)")
	f.IntVar(&opts.Nodes, "nodes", devenv.DefaultNodes, "number of nodes (minicloud instances or vSphere VMs with a simulated kubelet) to have at least")
	f.IntVar(&opts.PortBase, "port-base", 0, "first of 7 consecutive local ports to use (default: free ports)")
	f.IntVar(&opts.AddressBlock, "address-block", 0, "X in 127.X.0.0/16, the loopback block of instance IPs and load-balancer VIPs (default: saved in the state dir, else derived from its path)")
	f.StringVar(&opts.KubeBinDir, "kube-bin-dir", "", "folder with etcd, kube-apiserver and kube-controller-manager (default: built by hack/kubebins/build.sh)")
	f.StringVar(&opts.ManagerBinary, "manager-binary", "", "stratus-ccm binary to run (default: next to this binary, else built from the repository)")
	f.BoolVar(&opts.RealNodes, "real-nodes", false, "run each node as a real one: kubelet, containerd and kube-proxy in a network namespace of its own, pods behind the load balancers, pod traffic routed by minicloud's routes (root; minicloud cloud only; see docs/dev.md)")
	f.BoolVar(&opts.Prometheus, "prometheus", false, "also start Prometheus (the Debian package prometheus, when installed) scraping stratus-ccm with the monitoring mixin's rules and alerts loaded, and print its URL (docs/operations.md)")
	f.BoolVar(&opts.NoManager, "no-manager", false, "start everything but stratus-ccm (its flags are written to <state-dir>/manager.args)")
	cmd.AddCommand(newDemoCommand(), newDrillCommand("minicloud", `minicloud stops or starts the minicloud of the "stratus dev" running on
--state-dir, without stopping anything else: "stop" takes its API and load
balancers down (stratus sees a cloud outage), "hang" takes them down too but
leaves its address accepting connections that are never answered (a wedged
server: stratus's calls time out), "start" brings them back with the state
they had (kept in <state-dir>/minicloud), "status" says which.`),
		newDrillCommand("vcsim", `vcsim stops or starts the simulated vCenter of the "stratus dev --cloud
vsphere" running on --state-dir, without stopping anything else: "stop"
refuses its connections (stratus sees a vCenter outage; the VMs and their
kubelets keep running), "hang" accepts its connections and never answers (a
wedged vCenter: stratus's calls time out), "start" serves the same VMs again
on the same address, "status" says which.`))
	return cmd
}

// newDrillCommand returns `stratus dev <target> stop|start|hang|status`,
// which stop, start and hang a cloud of a running `stratus dev` for fault
// drills.
func newDrillCommand(target, long string) *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:       target + " " + strings.Join(devenv.ControlActions, "|"),
		Short:     "Stop, start or hang the " + target + " of a running `stratus dev` (outage drills)",
		Long:      long,
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: devenv.ControlActions,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := devenv.Control(cmd.Context(), stateDir, target, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", devenv.DefaultStateDir, "state dir of the running stratus dev")
	return cmd
}

func newDemoCommand() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Walk through what stratus does, against a running `stratus dev`",
		Long: `demo uses the environment of a running "stratus dev" (found through
--state-dir) and walks through the story with progress output: nodes initialized
with zone and type labels, a LoadBalancer Service that gets an external IP, an
HTTP request through that IP reaching a node, a stopped instance whose node gets
the shutdown taint, and a deleted instance whose node is removed. On a
"stratus dev --cloud openstack" the instance is a Nova server (an openstack:///
provider ID) and the external IP is the Octavia load balancer's floating IP. On a
"stratus dev --cloud vsphere" the machine is a VM: created, powered off (the
shutdown taint) and destroyed (out of the load balancer at once, the node
removed after the grace period).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devenv.Demo(cmd.Context(), devenv.DemoOptions{StateDir: stateDir, Out: cmd.OutOrStdout()})
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", devenv.DefaultStateDir, "state dir of the running stratus dev")
	return cmd
}
