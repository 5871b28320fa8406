package benchcmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/bench"
	"github.com/stratus-ccm/stratus/internal/dev/repo"
)

// NewRealNodesCommand returns `stratus bench-realnodes`: the perf-tests L4
// load-balancer latencies for stratus-ccm and the upstream CCM on real
// nodes.
func NewRealNodesCommand() *cobra.Command {
	var (
		out, markdown, binDir, stratusCCM string
		managers                          []string
		o                                 bench.RealNodesOptions
	)
	cmd := &cobra.Command{
		Use:   "bench-realnodes",
		Short: "Measure Service creation and node-sync latency on real nodes, stratus and the upstream CCM",
		Long: `bench-realnodes gives each manager an environment of its own on real nodes
(stratus dev --real-nodes, one after the other on --address-block): stratus-ccm from
its Helm chart as pods, or the upstream CCM (hack/kubebins' ccm) as a process with the
flags of manager.args. On each it runs agnhost netexec, one pod per node, creates
--services LoadBalancer Services at --rate per second and measures, per Service, the
time from its creation to a pod's answer through its ingress address (minicloud's VIP,
the NodePort, the real kube-proxy); then adds a node (a new minicloud instance) and
removes it (its instance, then its Node deleted) and measures, per load balancer, the
time until its targets in minicloud reflect it. It writes the samples and their
percentiles as JSON and Markdown. Needs root. Numbers are from one run on this machine;
nothing is asserted. See docs/benchmarks.md, "Latency on real nodes".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := repo.Root()
			if err != nil {
				return fmt.Errorf("run from the stratus repository: %w", err)
			}
			if o.KubeBinDir, o.StratusCCM, err = binaries(binDir, stratusCCM); err != nil {
				return err
			}
			o.RepoRoot = root
			o.Managers = managers
			if o.WorkDir == "" {
				o.WorkDir = filepath.Join(root, ".cache", "bench-realnodes")
			}
			if c, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
				o.Commit = strings.TrimSpace(string(c))
			}
			w := cmd.ErrOrStderr()
			logger := funcr.New(func(prefix, args string) {
				fmt.Fprintln(w, time.Now().UTC().Format("15:04:05"), "bench-realnodes:", args)
			}, funcr.Options{})
			o.Progress = func(r *bench.RealNodesReport) {
				if err := r.WriteJSON(out); err != nil {
					logger.Info("write partial results", "error", err.Error())
				}
			}
			rep, err := bench.RunRealNodes(log.IntoContext(cmd.Context(), logger), o)
			if err != nil {
				return err
			}
			if err := rep.WriteJSON(out); err != nil {
				return err
			}
			table := rep.Markdown()
			fmt.Fprint(cmd.OutOrStdout(), table)
			if markdown != "" {
				if err := os.WriteFile(markdown, []byte(table), 0o644); err != nil {
					return err
				}
			}
			for _, m := range rep.Managers {
				if m.Error != "" {
					return fmt.Errorf("%s: %s (what was measured is in %s)", m.Name, m.Error, out)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&managers, "managers", []string{bench.RealNodesStratus, bench.RealNodesUpstream}, "managers to measure, in order (stratus, upstream)")
	f.IntVar(&o.Services, "services", 50, "LoadBalancer Services per manager")
	f.Float64Var(&o.Rate, "rate", 5, "Services created per second (the burst's rate)")
	f.IntVar(&o.Nodes, "nodes", 2, "real nodes before one is added")
	f.IntVar(&o.Block, "address-block", 230, "the environments' address block (one environment at a time runs on it)")
	f.DurationVar(&o.PhaseTimeout, "phase-timeout", 15*time.Minute, "bound of each phase (nodes ready, services answering, node added, node removed)")
	f.StringVar(&o.WorkDir, "work-dir", "", "each manager's state dir and logs go to <work-dir>/<manager> (default .cache/bench-realnodes)")
	f.StringVar(&out, "out", "bench/results/realnodes.json", "where to write the JSON results")
	f.StringVar(&markdown, "markdown", "", "also write the results tables (Markdown) to this file")
	f.StringVar(&binDir, "kube-bin-dir", "", "folder with the kube binaries, ccm and the real nodes' binaries (default: hack/kubebins/build.sh --print-dir)")
	f.StringVar(&stratusCCM, "manager-binary", "", "stratus-ccm binary for the chart's image (default: bin/stratus-ccm in the repository)")
	return cmd
}
