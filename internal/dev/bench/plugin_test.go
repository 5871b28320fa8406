package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// TestPluginRunsBothSides is `make bench-plugin` as a harness check: both
// scenarios run in process and through the plugin, and every single call is
// timed on both sides. It asserts nothing about speed.
func TestPluginRunsBothSides(t *testing.T) {
	t.Parallel() // beside TestQuickRunsEveryScenario: nothing is shared
	if testing.Short() {
		t.Skip("runs control planes, stratus-ccm and its plugin; skipped under -short")
	}
	binDir, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			t.Fatalf("%s not found in %s: run `%s` first", name, binDir, testenv.BuildCommand)
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ccm := filepath.Join(t.TempDir(), "stratus-ccm")
	build := exec.Command("go", "build", "-o", ccm, "./cmd/stratus-ccm")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build stratus-ccm: %v\n%s", err, out)
	}
	ctx := log.IntoContext(context.Background(), testr.New(t))
	sizes := Sizes{BurstNodes: 3, LBBurstNodes: 2, LBBurstServices: 2}
	rep, err := RunPlugin(ctx, Options{BinDir: binDir, StratusCCM: ccm, WorkDir: t.TempDir(), Sizes: sizes, Cloud: DefaultCloud, Timeout: 3 * time.Minute}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != len(pluginScenarios) {
		t.Fatalf("report has %d scenarios, want %v", len(rep.Scenarios), pluginScenarios)
	}
	for _, s := range rep.Scenarios {
		if len(s.Errors) > 0 {
			t.Errorf("%s: %v", s.Name, s.Errors)
		}
		if len(s.InProcess) == 0 || len(s.Plugin) == 0 || len(s.Overhead) == 0 {
			t.Errorf("%s: missing metrics: in process %v, plugin %v, overhead %v", s.Name, s.InProcess, s.Plugin, s.Overhead)
		}
	}
	want := []string{"InstanceExists", "InstanceMetadata", "ListInstances", "GetLoadBalancer", "EnsureLoadBalancer"}
	if len(rep.Calls) != len(want) {
		t.Fatalf("calls %+v, want %v", rep.Calls, want)
	}
	for i, c := range rep.Calls {
		if c.Call != want[i] || c.Calls != 3 || c.InProcessMedianMS <= 0 || c.PluginMedianMS <= 0 {
			t.Errorf("call %d: %+v, want %s timed 3 times on each side", i, c, want[i])
		}
	}
	if err := rep.WriteJSON(filepath.Join(t.TempDir(), "results", "plugin.json")); err != nil {
		t.Fatal(err)
	}
	table := rep.Markdown()
	for _, w := range []string{"| node-init-burst |", "| lb-burst |", "| EnsureLoadBalancer | 2 nodes | 3 |"} {
		if !strings.Contains(table, w) {
			t.Errorf("table lacks %q:\n%s", w, table)
		}
	}
	t.Logf("results (one run, tiny sizes, not a measurement):\n%s", table)
}
