package benchcmd

import (
	"fmt"
	"os"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/bench"
)

// pluginBenchSizes are bench-plugin's default sizes: moderate, a few
// minutes in all.
var pluginBenchSizes = bench.Sizes{BurstNodes: 300, LBBurstNodes: 20, LBBurstServices: 100}

// NewPluginCommand returns `stratus bench-plugin`: the cost of running
// the provider out of process.
func NewPluginCommand() *cobra.Command {
	var (
		out, markdown, binDir, stratusCCM string
		sizes                             []string
		calls                             int
		opts                              = bench.Options{Cloud: bench.DefaultCloud}
	)
	cmd := &cobra.Command{
		Use:   "bench-plugin",
		Short: "Benchmark stratus-ccm with its provider through a plugin against in process",
		Long: `bench-plugin runs the node-init-burst and lb-burst scenarios for stratus-ccm
twice, with the minicloud provider in process and served by a "stratus-ccm plugin
serve" child over a Unix socket, each on a fresh control plane and minicloud with the
same limits, then makes single provider calls (--calls times each, on each side)
against one minicloud without latency or rate limit. It writes both sides' numbers
and the overhead (plugin - in process) in total and per call as JSON and as Markdown
tables. Numbers are from one run on this machine; nothing is asserted. See
docs/plugins.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Sizes = pluginBenchSizes
			for _, kv := range sizes {
				if err := opts.Sizes.Set(kv); err != nil {
					return fmt.Errorf("--size: %w", err)
				}
			}
			if calls <= 0 {
				return fmt.Errorf("--calls: %d is not a positive count", calls)
			}
			var err error
			if opts.BinDir, opts.StratusCCM, err = binaries(binDir, stratusCCM); err != nil {
				return err
			}
			w := cmd.ErrOrStderr()
			logger := funcr.New(func(prefix, args string) { fmt.Fprintln(w, "bench-plugin:", args) }, funcr.Options{})
			rep, err := bench.RunPlugin(log.IntoContext(cmd.Context(), logger), opts, calls)
			if err != nil {
				return err
			}
			if err := rep.WriteJSON(out); err != nil {
				return err
			}
			table := rep.Markdown()
			fmt.Fprint(cmd.OutOrStdout(), table)
			if markdown != "" {
				return os.WriteFile(markdown, []byte(table), 0o644)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&sizes, "size", nil, "override one scenario size, name=value (burstNodes, lbBurstNodes, lbBurstServices); repeatable")
	f.IntVar(&calls, "calls", bench.DefaultPluginCalls, "how many times each single provider call is made on each side")
	f.StringVar(&opts.WorkDir, "work-dir", "", "keep the control planes' files and the logs of each manager and plugin in this folder, created if missing (default: a temporary folder, removed)")
	f.StringVar(&out, "out", "bench/results/plugin.json", "where to write the JSON results")
	f.StringVar(&markdown, "markdown", "", "also write the results tables (Markdown) to this file")
	f.StringVar(&binDir, "kube-bin-dir", "", "folder with etcd and kube-apiserver (default: hack/kubebins/build.sh --print-dir)")
	f.StringVar(&stratusCCM, "manager-binary", "", "stratus-ccm binary (default: bin/stratus-ccm in the repository)")
	f.IntVar(&opts.KubeAPIQPS, "kube-api-qps", 20, "--kube-api-qps of the manager")
	f.IntVar(&opts.KubeAPIBurst, "kube-api-burst", 30, "--kube-api-burst of the manager")
	f.DurationVar(&opts.Timeout, "timeout", 0, "bound of each scenario run per side (default 15m)")
	return cmd
}
