package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/internal/dev/monitoring"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
)

// The address blocks of the monitoring tests, the last two (see the blocks
// of dev_e2e_test.go).
const (
	blockMonitoring       = 254
	blockMonitoringPlugin = 253
)

// TestDevPrometheusFaultDrills runs stratus dev --prometheus: a real
// Prometheus scrapes the real stratus-ccm with the mixin's rules (DevMixin's
// short durations), and two faults of the cloud make their alerts go pending
// or firing, as Prometheus's API reports them: a load balancer whose
// provisioning never completes (minicloud's hold_provisioning fault), and
// minicloud stopped while a Service wants a load balancer; stratus status
// shows each in text and JSON. Then every panel of the dashboard must have
// data.
func TestDevPrometheusFaultDrills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs stratus dev; skipped under -short")
	}
	if _, err := monitoring.Binary(); err != nil {
		t.Fatal(err) // names the Debian package
	}
	d := startDev(t, t.TempDir(), "--prometheus", "--nodes", "2", "--address-block", strconv.Itoa(blockMonitoring))
	ctx := t.Context()
	raw, err := os.ReadFile(filepath.Join(d.stateDir, PrometheusURLFile))
	if err != nil {
		t.Fatalf("stratus dev --prometheus wrote no URL: %v", err)
	}
	url := strings.TrimSpace(string(raw))
	if !strings.Contains(d.out.String(), "Prometheus on "+url) {
		t.Errorf("stratus dev did not print the Prometheus URL %s", url)
	}
	prom := monitoring.NewClient(url)

	testsupport.EventuallyState(t, time.Minute, "Prometheus scraping stratus-ccm, which leads", func(ctx context.Context) (bool, string) {
		s, err := prom.Query(ctx, `stratus:leader:sum`)
		if err != nil {
			return false, err.Error()
		}
		targets, _ := prom.Targets(ctx)
		return len(s) == 1 && s[0].Value == "1", fmt.Sprintf("stratus:leader:sum %v; targets %+v", s, targets)
	})

	d.createLBService(ctx, "web")
	d.waitLB(90*time.Second, "web", "Ready")

	// A provisioning that never completes.
	if _, err := d.conn.Cloud.SetFaults(ctx, api.Faults{HoldProvisioning: true}); err != nil {
		t.Fatal(err)
	}
	d.createLBService(ctx, "stuck")
	waitAlert(t, prom, "StratusLoadBalancerProvisioningStuck", "minicloud")
	// stratus status shows the same from the manager's metrics and the
	// API server.
	if out := d.status(t, "text"); !regexp.MustCompile(`(?m)^\s+default/stuck\s+provisioning\s+for `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s+minicloud\s+up\s`).MatchString(out) {
		t.Errorf("stratus status during the held provisioning shows no provisioning default/stuck and minicloud up:\n%s", out)
	}
	if _, err := d.conn.Cloud.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	d.waitLB(90*time.Second, "stuck", "Ready")

	// The cloud unreachable: stratus learns it when it calls, here for
	// a Service created during the outage.
	if out, err := d.minicloud(ctx, "stop"); err != nil {
		t.Fatalf("stratus dev minicloud stop: %v\n%s", err, out)
	}
	d.createLBService(ctx, "during-outage")
	waitAlert(t, prom, "StratusCloudUnreachable", "minicloud")
	waitAlert(t, prom, "StratusLoadBalancerFailing", "minicloud")
	var st struct {
		Providers []struct {
			Name string `json:"name"`
			Down bool   `json:"down"`
		} `json:"providers"`
		Controllers []struct {
			Name      string `json:"name"`
			LastError *struct {
				Reason string `json:"reason"`
			} `json:"lastError"`
		} `json:"controllers"`
		LoadBalancers map[string]int `json:"loadBalancers"`
		Nodes         map[string]int `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(d.status(t, "json")), &st); err != nil {
		t.Fatalf("stratus status -o json: %v", err)
	}
	if len(st.Providers) != 1 || st.Providers[0].Name != "minicloud" || !st.Providers[0].Down {
		t.Errorf("stratus status -o json providers %+v, want minicloud down", st.Providers)
	}
	if st.LoadBalancers["failing"] == 0 || st.Nodes["initialized"] != 2 {
		t.Errorf("stratus status -o json: load balancers %v (want some failing), nodes %v (want 2 initialized)", st.LoadBalancers, st.Nodes)
	}
	lastError := ""
	for _, c := range st.Controllers {
		if c.Name == "service" && c.LastError != nil {
			lastError = c.LastError.Reason
		}
	}
	if lastError != "SyncLoadBalancerFailed" {
		t.Errorf("stratus status -o json: the service controller's last error %q, want SyncLoadBalancerFailed", lastError)
	}
	if out, err := d.minicloud(ctx, "start"); err != nil {
		t.Fatalf("stratus dev minicloud start: %v\n%s", err, out)
	}
	d.waitLB(2*time.Minute, "during-outage", "Ready")

	panels, err := monitoring.DashboardPanels(DevMixin)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.EventuallyState(t, time.Minute, "every dashboard panel with data", func(ctx context.Context) (bool, string) {
		var empty []string
		for _, p := range panels {
			series := 0
			for _, q := range p.Queries {
				s, err := prom.Query(ctx, q)
				if err != nil {
					return false, err.Error()
				}
				series += len(s)
			}
			if series == 0 {
				empty = append(empty, fmt.Sprintf("%q %q", p.Title, p.Queries))
			}
		}
		return len(empty) == 0, "no data: " + strings.Join(empty, "; ")
	})
}

// status runs `stratus status -o format` on the environment.
func (d *devRun) status(t *testing.T, format string) string {
	t.Helper()
	out, err := exec.Command(d.bin, "status", "--state-dir", d.stateDir, "-o", format).Output()
	if err != nil {
		t.Fatalf("stratus status -o %s: %v\n%s", format, err, out)
	}
	return string(out)
}

// waitAlert waits until Prometheus holds alert name for provider, pending or
// firing, with its runbook's URL.
func waitAlert(t *testing.T, prom *monitoring.Client, name, provider string) {
	t.Helper()
	testsupport.EventuallyState(t, 2*time.Minute, "alert "+name+" pending or firing", func(ctx context.Context) (bool, string) {
		alerts, err := prom.Alerts(ctx)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, a := range alerts {
			seen = append(seen, a.Name()+"="+a.State)
			if a.Name() == name && a.Labels["provider"] == provider && slices.Contains([]string{"pending", "firing"}, a.State) &&
				strings.HasSuffix(a.Annotations["runbook_url"], "#"+strings.ToLower(name)) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("alerts %v", seen)
	})
}

// TestDevPrometheusPluginDrill runs stratus dev --prometheus --no-manager and
// the manager itself with its provider in a plugin process (stratus-ccm
// plugin serve, as the chart's sidecars), then kills the plugin: the alert
// StratusPluginDisconnected goes pending or firing, and stratus status shows
// the plugin disconnected.
func TestDevPrometheusPluginDrill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs stratus dev; skipped under -short")
	}
	if _, err := monitoring.Binary(); err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	manager := buildCommand(t, root, "cmd/stratus-ccm")
	d := startDev(t, t.TempDir(), "--prometheus", "--no-manager", "--nodes", "1", "--address-block", strconv.Itoa(blockMonitoringPlugin))
	raw, err := os.ReadFile(filepath.Join(d.stateDir, PrometheusURLFile))
	if err != nil {
		t.Fatal(err)
	}
	prom := monitoring.NewClient(strings.TrimSpace(string(raw)))

	// The manager's flags as stratus dev would run it, with the provider
	// behind a plugin instead of compiled in.
	sock := filepath.Join(t.TempDir(), "minicloud.sock")
	base, err := os.ReadFile(filepath.Join(d.stateDir, "stratus-ccm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(d.stateDir, "stratus-ccm-plugin.yaml")
	body := string(base) + "providers:\n- name: minicloud\n  type: plugin\n  plugin:\n    address: unix://" + sock + "\n"
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	argsFile, err := os.ReadFile(filepath.Join(d.stateDir, "manager.args"))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range strings.Fields(string(argsFile)) {
		switch {
		case strings.HasPrefix(a, "--cloud-provider="), strings.HasPrefix(a, "--cloud-config="):
		case strings.HasPrefix(a, "--config="):
			args = append(args, "--config="+config)
		default:
			args = append(args, a)
		}
	}
	logs := filepath.Join(d.stateDir, "logs")
	plugin := startLogged(t, filepath.Join(logs, "plugin.log"), manager, "plugin", "serve", "--provider", "minicloud",
		"--socket", sock, "--cloud-config", filepath.Join(d.stateDir, "minicloud.yaml"))
	startLogged(t, filepath.Join(logs, "stratus-ccm.log"), manager, args...)

	testsupport.EventuallyState(t, 2*time.Minute, "Prometheus seeing the plugin connected", func(ctx context.Context) (bool, string) {
		s, err := prom.Query(ctx, `stratus_cloud_plugin_connected{provider="minicloud"}`)
		if err != nil {
			return false, err.Error()
		}
		return len(s) == 1 && s[0].Value == "1", fmt.Sprintf("%v", s)
	})
	if err := plugin.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitAlert(t, prom, "StratusPluginDisconnected", "minicloud")
	if out := d.status(t, "text"); !regexp.MustCompile(`(?m)^\s+minicloud\s+.*plugin disconnected`).MatchString(out) {
		t.Errorf("stratus status after the plugin was killed does not show it disconnected:\n%s", out)
	}
}

// startLogged starts bin with args, its output in logPath, and kills it
// when the test ends.
func startLogged(t *testing.T, logPath, bin string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd
}
