package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// With real nodes stratus-ccm runs as the cluster's pods, installed from the
// repository's Helm chart as an operator would install it: two replicas on
// the nodes' host network with leader election, the chart's RBAC and
// tolerations, and its image imported into every node's runtime (no
// registry is reachable). The nodes it runs on are themselves uninitialized
// until it runs: the chart's tolerations let it start there, and it then
// initializes every node that registered before it.

// ChartRelease and ChartNamespace are where the dev environment installs
// the chart.
const (
	ChartRelease   = "stratus"
	ChartNamespace = "kube-system"
)

// chartValues returns the chart's values for the environment: the minicloud
// provider, reached through the forwarder on the host's node-network
// address, its cloud-config (with the token) in the chart's Secret, routes
// for the real nodes' pod network, and the environment's short periods.
func (e *env) chartValues() ([]byte, error) {
	cloudURL := "http://" + netip.AddrPortFrom(e.real.net.hostIP, uint16(e.ports.Minicloud)).String()
	values := map[string]any{
		"image": map[string]any{
			"repository": ManagerImageRepository,
			"tag":        ManagerImageTag,
			"pullPolicy": "Never",
		},
		"replicas":             2,
		"cloudProvider":        "minicloud",
		"clusterName":          ClusterName,
		"clusterCIDR":          e.clusterCIDR(),
		"configureCloudRoutes": true,
		"cloudConfig": map[string]any{
			"key": "cloud.yaml",
			// Real nodes run kube-proxy: a node whose kube-proxy is down
			// leaves the Cluster-policy pools.
			"content": fmt.Sprintf("url: %s\ntoken: %s\nclusterHealthCheck: kubeProxy\n", cloudURL, e.cloud.token),
		},
		"extraArgs": []string{
			"--route-reconciliation-period=5s",
			"--node-monitor-period=5s",
			"--node-deletion-grace-period=" + NodeDeletionGracePeriod.String(),
		},
		"managerConfig": map[string]any{
			// A route deleted in the cloud is put back within 10 s
			// (default 5m: drift repair costs a listing per period).
			"route": map[string]any{"resyncPeriod": "10s"},
			"nodeLifecycle": map[string]any{
				"deletionBudgetPercent": 100,
				"deletionBudgetMin":     100,
				"deletionBudgetWindow":  "1m",
			},
		},
		// The dev nodes are workers; the chart's default selects
		// control-plane nodes (a null value removes the key).
		"nodeSelector": map[string]any{"node-role.kubernetes.io/control-plane": nil},
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "10m", "memory": "64Mi"},
			"limits":   map[string]any{"memory": "512Mi"},
		},
	}
	return json.MarshalIndent(values, "", "  ")
}

// installChart installs (or upgrades) the chart with helm.
func (e *env) installChart(ctx context.Context) error {
	if e.opts.RepoRoot == "" {
		return fmt.Errorf("--real-nodes installs stratus from deploy/helm/stratus: run from the stratus repository")
	}
	values, err := e.chartValues()
	if err != nil {
		return err
	}
	path := filepath.Join(e.real.dir, "chart-values.json")
	if err := os.WriteFile(path, values, 0o600); err != nil { // holds the cloud token
		return fmt.Errorf("write chart values: %w", err)
	}
	chart := filepath.Join(e.opts.RepoRoot, "deploy", "helm", "stratus")
	out, err := runCmd(ctx, filepath.Join(e.cp.BinDir, "helm"), "upgrade", "--install", ChartRelease, chart,
		"--namespace", ChartNamespace, "--kubeconfig", e.cp.KubeconfigPath(), "--values", path)
	if err != nil {
		return fmt.Errorf("helm install stratus: %w\n%s", err, out)
	}
	e.say("stratus-ccm installed from %s (helm release %s in %s; 2 replicas, leader election) with image %s:%s",
		chart, ChartRelease, ChartNamespace, ManagerImageRepository, ManagerImageTag)
	return nil
}

// realManagerLine is the summary's manager line with real nodes.
func (e *env) realManagerLine() string {
	return "pods of helm release " + ChartRelease + " in " + ChartNamespace + " (kubectl -n " + ChartNamespace +
		" get pods -l app.kubernetes.io/name=stratus), reaching minicloud at " +
		netip.AddrPortFrom(e.real.net.hostIP, uint16(e.ports.Minicloud)).String() + "; routes for " + e.clusterCIDR()
}
