package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratus-ccm/stratus/internal/devenv"
)

// newDevCommand returns `stratus dev`: the one-command local environment,
// `stratus dev demo`, the guided tour against it, and `stratus dev
// minicloud`, which stops and starts its cloud.
func newDevCommand() *cobra.Command {
	opts := devenv.Options{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run stratus on a local cluster and cloud (etcd, kube-apiserver, kube-controller-manager, minicloud, stratus-ccm, simulated kubelets)",
		Long: `dev starts a complete local environment and keeps it running until Ctrl-C:
etcd, kube-apiserver and kube-controller-manager (built once by hack/kubebins),
minicloud, the stratus-ccm manager configured for it, and --nodes simulated
kubelets backed by minicloud instances. It writes <state-dir>/kubeconfig and
<state-dir>/env, logs each component under <state-dir>/logs, prints what
stratus does, and prints "` + devenv.ReadyLine + `" once the nodes are registered.
A manager that exits is restarted (with a backoff); "stratus dev minicloud
stop|start" takes the cloud down and up for outage drills. Starting it again
reuses the state. See docs/dev.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			opts.RepoRoot = repoRoot()
			return devenv.Run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.StateDir, "state-dir", devenv.DefaultStateDir, "where the cluster, the cloud, kubeconfig, env and logs are kept")
	f.IntVar(&opts.Nodes, "nodes", devenv.DefaultNodes, "number of nodes (minicloud instances with a simulated kubelet) to have at least")
	f.IntVar(&opts.PortBase, "port-base", 0, "first of 6 consecutive local ports to use (default: free ports)")
	f.IntVar(&opts.AddressBlock, "address-block", 0, "X in 127.X.0.0/16, the loopback block of instance IPs and load-balancer VIPs (default: saved in the state dir, else derived from its path)")
	f.StringVar(&opts.KubeBinDir, "kube-bin-dir", "", "folder with etcd, kube-apiserver and kube-controller-manager (default: built by hack/kubebins/build.sh)")
	f.StringVar(&opts.ManagerBinary, "manager-binary", "", "stratus-ccm binary to run (default: next to this binary, else built from the repository)")
	f.BoolVar(&opts.NoManager, "no-manager", false, "start everything but stratus-ccm (its flags are written to <state-dir>/manager.args)")
	cmd.AddCommand(newDevDemoCommand(), newDevMinicloudCommand())
	return cmd
}

// newDevMinicloudCommand returns `stratus dev minicloud stop|start|status`,
// which stop and start the minicloud of a running `stratus dev` for fault
// drills.
func newDevMinicloudCommand() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "minicloud stop|start|status",
		Short: "Stop or start the minicloud of a running `stratus dev` (outage drills)",
		Long: `minicloud stops or starts the minicloud of the "stratus dev" running on
--state-dir, without stopping anything else: "stop" takes its API and load
balancers down (stratus sees a cloud outage), "start" brings them back with
the state they had (kept in <state-dir>/minicloud), "status" says which.`,
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: devenv.MinicloudActions,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := devenv.MinicloudControl(cmd.Context(), stateDir, args[0])
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

func newDevDemoCommand() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Walk through what stratus does, against a running `stratus dev`",
		Long: `demo uses the environment of a running "stratus dev" (found through
--state-dir) and walks through the story with progress output: nodes initialized
with zone and type labels, a LoadBalancer Service that gets an external IP, an
HTTP request through that IP reaching a node, a stopped instance whose node gets
the shutdown taint, and a deleted instance whose node is removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devenv.Demo(cmd.Context(), devenv.DemoOptions{StateDir: stateDir, Out: cmd.OutOrStdout()})
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", devenv.DefaultStateDir, "state dir of the running stratus dev")
	return cmd
}

// repoRoot returns the stratus repository containing the working directory,
// or "" outside it.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/stratus-ccm/stratus\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
