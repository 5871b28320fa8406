package compat

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stratus-ccm/stratus/internal/manager/managertest"
)

// stratusPlugin is stratus-ccm whose minicloud provider runs out of process:
// a `stratus-ccm plugin serve --provider=minicloud` child, used as
// --cloud-provider=plugin (docs/plugins.md).
const stratusPlugin side = "stratus-plugin"

// pluginScenarios are the scenarios TestPluginParity runs: node
// initialization through cloud errors, shutdown, load-balancer creation
// through cloud errors and deletion, and routes; each kind of controller
// work, few enough to run at once (make test runs them).
var pluginScenarios = []string{
	"node-init-cloud-errors", "node-shutdown", "lb-create-cloud-errors", "lb-delete", "routes",
}

// TestPluginParity runs scenarios of TestUpstreamParity twice with
// stratus-ccm, its provider in process and through a plugin, and fails on
// any difference: a provider served over the plugin protocol behaves as the
// same provider compiled in. No tolerance applies (both sides are stratus).
func TestPluginParity(t *testing.T) {
	ran := 0
	for _, sc := range scenarios {
		if !slices.Contains(pluginScenarios, sc.name) {
			continue
		}
		ran++
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			compareSides(t, []side{stratus, stratusPlugin}, func(t *testing.T, s side) any {
				r := startRun(t, s, sc)
				sc.run(r)
				snap, names := r.takeSnapshot(sc.events)
				got := normalize(snap, names)
				if testing.Verbose() {
					js, _ := json.MarshalIndent(got, "", "  ")
					t.Logf("final state (normalized):\n%s", js)
				}
				return got
			}, func(got []any) {
				if d := cmp.Diff(got[0], got[1]); d != "" {
					t.Errorf("stratus-ccm through the plugin differs from stratus-ccm with the provider in process (-in process +plugin):\n%s", d)
				}
			})
		})
	}
	if ran != len(pluginScenarios) {
		t.Fatalf("ran %d of the plugin scenarios %v: a name is not in scenarios", ran, pluginScenarios)
	}
}

// throughPlugin starts `stratus-ccm plugin serve` with the run's minicloud
// cloud-config until the test ends, and returns the manager's args with the
// plugin in place of the in-process provider.
func throughPlugin(t *testing.T, args []string, cloudConfig, kubeconfig string) []string {
	t.Helper()
	// A Unix socket path is limited to about 100 bytes: t.TempDir() can be
	// longer.
	dir, err := os.MkdirTemp("", "compat")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "mc.sock")
	managertest.StartCommand(t, "plugin", "serve", "--provider=minicloud", "--cloud-config="+cloudConfig,
		"--socket="+socket, "--kubeconfig="+kubeconfig)
	block := filepath.Join(dir, "plugin.yaml")
	if err := os.WriteFile(block, fmt.Appendf(nil, "address: unix://%s\n", socket), 0o600); err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(args))
	for _, a := range args {
		switch {
		case a == "--cloud-provider=minicloud":
			a = "--cloud-provider=plugin"
		case strings.HasPrefix(a, "--cloud-config="):
			a = "--cloud-config=" + block
		}
		out = append(out, a)
	}
	return out
}
