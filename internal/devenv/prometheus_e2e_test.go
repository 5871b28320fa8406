package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/internal/monitoring"
	"github.com/stratus-ccm/stratus/internal/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
)

// blockMonitoring is the address block of TestDevPrometheusFaultDrills, the
// last one (see the blocks of dev_e2e_test.go).
const blockMonitoring = 254

// TestDevPrometheusFaultDrills runs stratus dev --prometheus: a real
// Prometheus scrapes the real stratus-ccm with the mixin's rules (DevMixin's
// short durations), and two faults of the cloud make their alerts go pending
// or firing, as Prometheus's API reports them: a load balancer whose
// provisioning never completes (minicloud's hold_provisioning fault), and
// minicloud stopped while a Service wants a load balancer. Then every panel
// of the dashboard must have data.
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
