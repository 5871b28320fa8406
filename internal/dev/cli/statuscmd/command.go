// Package statuscmd is `stratus status`: one screen, for a person at a
// terminal, of what a running stratus-ccm is doing, read from one replica's
// /metrics and from the API server: who leads (the Lease) and the replicas,
// each controller's queue and last error, each provider's health and request
// budget by priority, the load balancers provisioning, failing and ready, the
// nodes not initialized and those whose deletion the guard holds, and why.
// -o json prints the same for scripts.
package statuscmd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stratus-ccm/stratus/internal/dev/cli/table"
	"github.com/stratus-ccm/stratus/internal/dev/devenv"
	"github.com/stratus-ccm/stratus/internal/dev/monitoring"
)

type options struct {
	kubeconfig, stateDir, output        string
	metricsURL, tokenFile, caFile       string
	leaseNamespace, leaseName, selector string
}

// NewCommand returns `stratus status`.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what a running stratus-ccm is doing: leader, controllers' queues, cloud budget, load balancers, nodes",
		Long: `status reads one stratus-ccm replica's /metrics (--metrics-url, with the
bearer token in --token-file: an identity allowed get on /metrics) and the API
server (--kubeconfig) and prints one screen: the leader and replicas (the
Lease, and the pods --selector matches in its namespace), each controller's
queue, reconcile errors and last Warning event, each provider's health (in an
outage, plugin connection) and request budget by priority (calls waiting, mean
wait), the LoadBalancer Services provisioning, failing and ready, and the nodes
not initialized and those whose deletion the guard holds, with why.

Against a "stratus dev" environment (--state-dir, default .stratus/dev when it
exists) everything is found in its state dir; without the token "stratus dev
--prometheus" wrote there, status grants itself one (a ServiceAccount allowed
get on /metrics). See docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.StringVar(&o.stateDir, "state-dir", "", "a running `stratus dev` environment to read (default "+devenv.DefaultStateDir+" when it exists and no --kubeconfig is given)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&o.metricsURL, "metrics-url", "", "a replica's metrics endpoint, e.g. https://127.0.0.1:10258/metrics (through kubectl port-forward)")
	f.StringVar(&o.tokenFile, "token-file", "", "file with a bearer token allowed get on /metrics (e.g. from `kubectl create token`)")
	f.StringVar(&o.caFile, "metrics-ca-file", "", "CA of the metrics endpoint's certificate (default: not verified; stratus-ccm's own is self-signed)")
	f.StringVar(&o.leaseNamespace, "lease-namespace", "kube-system", "namespace of the leader election Lease (and of the replicas' pods)")
	f.StringVar(&o.leaseName, "lease-name", "cloud-controller-manager", "name of the leader election Lease")
	f.StringVar(&o.selector, "selector", "app.kubernetes.io/name=stratus", "label selector of the manager's pods")
	return cmd
}

func (o *options) run(cmd *cobra.Command) error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("-o %q: want text or json", o.output)
	}
	ctx := cmd.Context()
	if o.stateDir == "" && o.kubeconfig == "" {
		if _, err := os.Stat(filepath.Join(devenv.DefaultStateDir, "kubeconfig")); err == nil {
			o.stateDir = devenv.DefaultStateDir
		}
	}
	src := Source{LeaseNamespace: o.leaseNamespace, LeaseName: o.leaseName, Selector: o.selector, MetricsURL: o.metricsURL, CAFile: o.caFile}
	kubeconfig := o.kubeconfig
	if o.stateDir != "" && kubeconfig == "" {
		kubeconfig = filepath.Join(o.stateDir, "kubeconfig")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	restCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if src.Kube, err = kubernetes.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		src.Token = strings.TrimSpace(string(b))
	} else if restCfg.BearerToken != "" {
		src.Token = restCfg.BearerToken
	}
	if o.stateDir != "" {
		if err := o.fromDevEnv(cmd, &src); err != nil {
			return err
		}
	}
	if src.MetricsURL == "" {
		return errors.New("--metrics-url is required outside a `stratus dev` environment")
	}
	st := Read(ctx, src)
	if o.output == "json" {
		return table.Print(cmd.OutOrStdout(), "json", st, nil, nil)
	}
	return Render(cmd.OutOrStdout(), st)
}

// fromDevEnv fills what the flags left empty from a dev environment's state
// dir: the manager's port and a token for /metrics. The dev manager runs
// without leader election, so there is no Lease and no pods.
func (o *options) fromDevEnv(cmd *cobra.Command, src *Source) error {
	if src.MetricsURL == "" {
		ports, err := devenv.ReadPorts(o.stateDir)
		if err != nil {
			return err
		}
		src.MetricsURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Manager)) + "/metrics"
	}
	if src.Token != "" {
		return nil
	}
	path := filepath.Join(o.stateDir, "prometheus", "token")
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join(o.stateDir, "status-token")
		if err := monitoring.GrantScrapeToken(cmd.Context(), src.Kube, path); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	src.Token = strings.TrimSpace(string(b))
	src.Selector = ""
	return nil
}

// Render writes st as text.
func Render(w io.Writer, st *Status) error {
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return st.Time.Sub(t).Round(time.Second).String()
	}
	fmt.Fprintf(w, "stratus status at %s, metrics from %s\n", st.Time.Format(time.RFC3339), st.MetricsURL)

	l := st.Leader
	leads := "no"
	if l.ScrapedLeads {
		leads = "yes"
	}
	if l.Holder != "" {
		fmt.Fprintf(w, "\nLeader     %s (lease %s renewed %s ago, %d transitions); the scraped replica leads: %s\n", l.Holder, l.Lease, ago(l.RenewTime), l.Transitions, leads)
	} else {
		fmt.Fprintf(w, "\nLeader     no lease %s (leader election off?); the scraped replica runs the controllers: %s\n", l.Lease, leads)
	}
	if len(l.Replicas) > 0 {
		var rs []string
		for _, r := range l.Replicas {
			state := "not ready"
			if r.Ready {
				state = "ready"
			}
			rs = append(rs, r.Name+" "+state)
		}
		fmt.Fprintf(w, "Replicas   %d: %s\n", len(l.Replicas), strings.Join(rs, ", "))
	}

	fmt.Fprintln(w, "\nProviders")
	var rows [][]string
	for _, p := range st.Providers {
		health := "up"
		if p.Down {
			health = "DOWN (outage)"
		}
		if p.Plugin != "" {
			health += ", plugin " + p.Plugin
		}
		var prios []string
		for _, pr := range p.Priorities {
			if pr.Queued == 0 && pr.Calls == 0 {
				continue
			}
			prios = append(prios, fmt.Sprintf("%s: %g waiting, %d calls, mean wait %s", pr.Name, pr.Queued, pr.Calls, time.Duration(pr.MeanWait*float64(time.Second)).Round(time.Millisecond)))
		}
		rows = append(rows, []string{"  " + p.Name, health, fmt.Sprintf("%g (%g failed, %g throttled)", p.Calls, p.Failed, p.Throttled), fmt.Sprintf("%g", p.Available), strings.Join(prios, "; ")})
	}
	if err := table.Write(w, []string{"  NAME", "HEALTH", "CALLS", "BUDGET TOKENS", "BUDGET BY PRIORITY"}, rows); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nControllers")
	rows = nil
	for _, c := range st.Controllers {
		last := "-"
		if e := c.LastError; e != nil {
			last = fmt.Sprintf("%s ago %s %s: %s", ago(e.Time), e.Object, e.Reason, shorten(e.Message, 100))
		}
		rows = append(rows, []string{"  " + c.Name, fmt.Sprintf("%g", c.Depth), fmt.Sprintf("%g", c.Reconciles), fmt.Sprintf("%g", c.Errors), last})
	}
	if err := table.Write(w, []string{"  QUEUE", "DEPTH", "RECONCILES", "ERRORS", "LAST WARNING"}, rows); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nLoad balancers  %s\n", counts(st.LoadBalancers, "ready", "provisioning", "failing", "no_backends", "invalid"))
	objects(w, st.LoadBalancerProblems, ago)
	fmt.Fprintf(w, "\nNodes           %s\n", counts(st.Nodes, "initialized", "uninitialized"))
	objects(w, st.Uninitialized, ago)
	if len(st.HeldDeletions) > 0 {
		fmt.Fprintf(w, "Deletions held  %d\n", len(st.HeldDeletions))
		objects(w, st.HeldDeletions, ago)
	}
	for _, e := range st.Errors {
		fmt.Fprintf(w, "\nnot read: %s\n", e)
	}
	return nil
}

func counts(m map[string]int, order ...string) string {
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], strings.ReplaceAll(k, "_", " ")))
	}
	return strings.Join(parts, ", ")
}

func objects(w io.Writer, objs []Object, ago func(time.Time) string) {
	var rows [][]string
	for _, o := range objs {
		why := o.Detail
		if o.Reason != "" {
			why = o.Reason + ": " + why
		}
		rows = append(rows, []string{"  " + o.Name, o.State, "for " + ago(o.Since), shorten(why, 120)})
	}
	if len(rows) > 0 {
		_ = table.Write(w, []string{"  NAME", "STATE", "SINCE", "WHY"}, rows)
	}
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
