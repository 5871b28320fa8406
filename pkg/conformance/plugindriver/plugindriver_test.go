package plugindriver_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/internal/dev/conformance/mcdriver"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport/conformancetest"
	"github.com/stratus-ccm/stratus/pkg/app"
	"github.com/stratus-ccm/stratus/pkg/conformance"
	"github.com/stratus-ccm/stratus/pkg/conformance/plugindriver"
	"github.com/stratus-ccm/stratus/pkg/plugin"
)

// serveEnv makes this test binary, run again as a child, be `stratus-ccm`
// (with the providers this package's imports register): the plugin process
// of TestExec.
const serveEnv = "PLUGINDRIVER_TEST_STRATUS_CCM"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		os.Exit(app.Main("test", os.Args[1:]...))
	}
	testenv.Main(m)
}

// TestConformance runs the whole kit against the minicloud provider served
// by plugin.Serve in this process, through the provider protocol (provider
// type "plugin", also for the e2e group's stratus-ccm): every scenario
// passes, as in process, and only the instance watch minicloud lacks is
// skipped.
func TestConformance(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	mc, err := mcdriver.StartInProcess(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target, err := plugindriver.Serve(ctx, mc, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	if target.Provider != plugin.ProviderType || target.Name != "minicloud (plugin)" {
		t.Fatalf("target: provider %q, name %q; want %q, %q", target.Provider, target.Name, plugin.ProviderType, "minicloud (plugin)")
	}
	conformancetest.Run(t, target, conformancetest.Want{
		MaySkip:      conformancetest.SkipsNamed("instancewatcher/", "backendpools/"),
		AllScenarios: true,
	})
}

// TestExec serves minicloud from a `stratus-ccm plugin serve` child
// process, as the upstream providers' builds are run: the instance
// scenarios pass through it.
func TestExec(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	mc, err := mcdriver.StartInProcess(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(serveEnv, "1")
	target, err := plugindriver.Exec(ctx, mc, env.Config, os.Args[0], "plugin", "serve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	rep := conformancetest.Run(t, target, conformancetest.Want{
		Focus:   regexp.MustCompile(`^instances/(provider-id|running-exists|stopped-is-shutdown|deleted-not-exists)$`),
		MaySkip: func(conformance.Result) bool { return true },
	})
	if got := rep.Count(conformance.Passed); got != 4 {
		t.Errorf("%d scenarios passed, want 4", got)
	}
}

// A plugin process that exits before serving fails Exec with its output.
func TestExecReportsExit(t *testing.T) {
	t.Setenv(serveEnv, "1")
	closed := false
	target := &conformance.Target{Provider: "no-such-provider", Close: func() { closed = true }}
	_, err := plugindriver.Exec(context.Background(), target, nil, os.Args[0], "plugin", "serve")
	if err == nil || !strings.Contains(err.Error(), `provider "no-such-provider" is not registered in this build`) {
		t.Errorf("Exec of a plugin that exits: %v; want an error with its output", err)
	}
	if !closed {
		t.Error("the Target given to a failed Exec was not closed")
	}
}
