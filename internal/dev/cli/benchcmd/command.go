// Package benchcmd is the `stratus bench` and `stratus bench-plugin` commands:
// flags and reports around the benchmark harness (internal/dev/bench), which runs
// stratus side by side with the upstream CCM, and stratus's providers in
// process against the same as plugins.
package benchcmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/bench"
	"github.com/stratus-ccm/stratus/internal/dev/repo"
)

// NewCommand returns `stratus bench`: the scale benchmarks side by side
// with the upstream CCM.
func NewCommand() *cobra.Command {
	var (
		quick                 bool
		out, markdown, binDir string
		chart, ladderChart    string
		stratusCCM            string
		sizes                 []string
		mergeInto             string
		from                  string
		opts                  = bench.Options{Cloud: bench.DefaultCloud}
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark stratus-ccm against the upstream cloud-controller-manager on the same control plane and minicloud",
		Long: `bench runs each scenario (` + strings.Join(bench.Names(), ", ") + `) once
for the upstream CCM (hack/kubebins' ccm, with providers/minicloud) and once for
stratus-ccm, each on a fresh control plane and minicloud with the same limits and
the same --kube-api-qps/burst (vsphere-*: the upstream vSphere CCM against a
simulated vCenter; openstack-*: the upstream OpenStack CCM, hack/kubebins'
openstack-ccm, against minicloud's OpenStack dialect with the same cloud.conf as
stratus's openstack provider), and writes the numbers and their ratios
(upstream / stratus: higher is better for stratus) as JSON and as a Markdown table.
Numbers are from one run on this machine; nothing is asserted. See docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from != "" {
				rep, err := bench.ReadReport(from)
				if err != nil {
					return fmt.Errorf("--from: %w", err)
				}
				return writeReport(cmd, rep, "", chart, ladderChart, markdown)
			}
			opts.Sizes = bench.FullSizes
			if quick {
				opts.Sizes = bench.QuickSizes
			}
			for _, kv := range sizes {
				if err := opts.Sizes.Set(kv); err != nil {
					return fmt.Errorf("--size: %w", err)
				}
			}
			for _, m := range opts.Managers {
				if m != "upstream" && m != "stratus" {
					return fmt.Errorf("--manager %q: want upstream or stratus", m)
				}
			}
			var err error
			if opts.BinDir, opts.StratusCCM, err = binaries(binDir, stratusCCM); err != nil {
				return err
			}
			w := cmd.ErrOrStderr()
			logger := funcr.New(func(prefix, args string) { fmt.Fprintln(w, "bench:", args) }, funcr.Options{})
			var base *bench.Report
			if mergeInto != "" {
				r, err := bench.ReadReport(mergeInto)
				if err != nil {
					return fmt.Errorf("--merge-into: %w", err)
				}
				base = r
			}
			// merged is the report to write: the results so far, folded into
			// --merge-into's when given.
			merged := func(rep *bench.Report) *bench.Report {
				if base == nil {
					return rep
				}
				all := *base
				all.Scenarios = slices.Clone(base.Scenarios)
				all.Merge(rep)
				return &all
			}
			// The JSON is written after every scenario, so an interrupted
			// run keeps the scenarios it finished.
			opts.Progress = func(rep *bench.Report) {
				if err := merged(rep).WriteJSON(out); err != nil {
					logger.Error(err, "writing the results so far")
				}
			}
			rep, err := bench.Run(log.IntoContext(cmd.Context(), logger), opts)
			if err != nil {
				return err
			}
			return writeReport(cmd, merged(rep), out, chart, ladderChart, markdown)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "small sizes: all scenarios in a few minutes (a harness check, not a measurement)")
	f.StringSliceVar(&opts.Scenarios, "scenario", nil, "run only these scenarios (default: all)")
	f.StringArrayVar(&sizes, "size", nil, "override one scenario size, name=value (e.g. lbBurstServices=100, steadyWindow=5m); repeatable")
	f.StringSliceVar(&opts.Managers, "manager", nil, "run only this side (upstream or stratus), to investigate; the report then has no ratios")
	f.StringVar(&opts.WorkDir, "work-dir", "", "keep the control planes' files and each manager's log (<scenario>-<manager>.log) in this folder, created if missing (default: a temporary folder, removed)")
	f.StringVar(&from, "from", "", "run nothing: write the table (stdout, --markdown) and --chart of this saved report (JSON)")
	f.StringVar(&mergeInto, "merge-into", "", "a report (JSON) whose results of the scenarios run now are replaced (others kept); the merged report is what --out, --markdown and --chart get")
	f.StringVar(&out, "out", "bench/results/latest.json", "where to write the JSON results")
	f.StringVar(&markdown, "markdown", "", "also write the results table (Markdown) to this file")
	f.StringVar(&chart, "chart", "", "also draw the ratios as a PNG bar chart at this path")
	f.StringVar(&ladderChart, "ladder-chart", "", "also draw the scale-ladder scenario's figures against the number of nodes as a PNG line chart at this path")
	f.StringVar(&binDir, "kube-bin-dir", "", "folder with etcd, kube-apiserver and ccm (default: hack/kubebins/build.sh --print-dir)")
	f.StringVar(&stratusCCM, "manager-binary", "", "stratus-ccm binary (default: bin/stratus-ccm in the repository)")
	f.Float64Var(&opts.Cloud.RateLimit, "cloud-rate-limit", opts.Cloud.RateLimit, "minicloud requests per second per token")
	f.IntVar(&opts.Cloud.Burst, "cloud-burst", opts.Cloud.Burst, "minicloud rate-limit burst")
	f.IntVar(&opts.Cloud.LatencyMS, "cloud-latency-ms", opts.Cloud.LatencyMS, "latency added to every minicloud request")
	f.DurationVar(&opts.Cloud.LBProvisionDelay, "lb-provision-delay", opts.Cloud.LBProvisionDelay, "how long a new minicloud load balancer provisions")
	f.DurationVar(&opts.Cloud.OpenStackProvisionDelay, "openstack-provision-delay", opts.Cloud.OpenStackProvisionDelay, "how long a new Octavia load balancer of the openstack-* scenarios stays PENDING_CREATE")
	f.DurationVar(&opts.Cloud.OpenStackPendingDelay, "openstack-pending-delay", opts.Cloud.OpenStackPendingDelay, "how long an Octavia load balancer of the openstack-* scenarios stays PENDING_UPDATE after each change")
	f.IntVar(&opts.Cloud.VSphereLatencyMS, "vsphere-latency-ms", opts.Cloud.VSphereLatencyMS, "latency added to every request to the simulated vCenter of the vsphere-* scenarios")
	f.StringVar(&opts.Mode, "mode", "", `flags of both managers: "defaults" (none: each manager's own defaults), "tuned" (`+strings.Join(bench.TunedFlags, " ")+`), or empty for --kube-api-qps/--kube-api-burst below`)
	f.IntVar(&opts.Repeats, "repeats", 1, "runs of each short scenario (node-init-burst, lb-burst, node-churn) per manager; the report has the median and the range")
	f.IntVar(&opts.KubeAPIQPS, "kube-api-qps", 20, "--kube-api-qps of both managers")
	f.IntVar(&opts.KubeAPIBurst, "kube-api-burst", 30, "--kube-api-burst of both managers")
	f.StringVar(&opts.HeapProfileDir, "heap-profile", "", "take each manager's heap profile at the memory scenario's peak, and its CPU profile over each scale-ladder rung's window and heap profile after it (through its /debug/pprof/, both managers then serve on 127.0.0.1) into this folder; the report gets the summaries (needs the go command)")
	f.DurationVar(&opts.Timeout, "timeout", 0, "bound of each scenario run per manager (default 15m)")
	return cmd
}

// binaries returns the control-plane binaries' folder and the stratus-ccm
// binary: the flags' values, else hack/kubebins's and bin/stratus-ccm of the
// repository the command runs in.
func binaries(binDir, stratusCCM string) (string, string, error) {
	if binDir != "" && stratusCCM != "" {
		return binDir, stratusCCM, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", "", fmt.Errorf("run from the stratus repository or pass --kube-bin-dir and --manager-binary: %w", err)
	}
	if binDir == "" {
		if binDir, err = kubebinsDir(root); err != nil {
			return "", "", err
		}
	}
	if stratusCCM == "" {
		stratusCCM = filepath.Join(root, "bin", "stratus-ccm")
	}
	return binDir, stratusCCM, nil
}

// kubebinsDir asks hack/kubebins/build.sh where its binaries are.
func kubebinsDir(root string) (string, error) {
	script := filepath.Join(root, "hack", "kubebins", "build.sh")
	cmd := exec.Command(script, "--print-dir")
	cmd.Dir = root
	dir, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --print-dir: %w", script, err)
	}
	return strings.TrimSpace(string(dir)), nil
}

// writeReport writes rep as JSON to out (unless empty), its charts and its
// table, which also goes to stdout.
func writeReport(cmd *cobra.Command, rep *bench.Report, out, chart, ladderChart, markdown string) error {
	if out != "" {
		if err := rep.WriteJSON(out); err != nil {
			return err
		}
	}
	if chart != "" {
		if err := rep.WriteChart(chart); err != nil {
			return err
		}
	}
	if ladderChart != "" {
		if err := rep.WriteLadderChart(ladderChart); err != nil {
			return err
		}
	}
	table := rep.Markdown()
	fmt.Fprint(cmd.OutOrStdout(), table)
	if markdown != "" {
		return os.WriteFile(markdown, []byte(table), 0o644)
	}
	return nil
}
