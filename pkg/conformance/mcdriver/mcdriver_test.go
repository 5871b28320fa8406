package mcdriver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/internal/testenv"
	"github.com/stratus-ccm/stratus/pkg/conformance"
	"github.com/stratus-ccm/stratus/pkg/conformance/mcdriver"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestConformance runs the whole kit against the minicloud provider and
// an in-process minicloud: every scenario passes, and only those that
// need what minicloud lacks are skipped.
func TestConformance(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	target, err := mcdriver.StartInProcess(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	rep, err := conformance.Run(ctx, conformance.Config{
		Provider:    target.Provider,
		CloudConfig: target.CloudConfig,
		Driver:      target.Driver,
		KubeConfig:  env.Config,
		ClusterName: "cf-" + env.Namespace(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	conformance.WriteTable(&table, rep)
	t.Log("\n" + table.String())
	for _, r := range rep.Results {
		switch {
		case r.Status == conformance.Failed:
			t.Errorf("%s: %s", r.Name, r.Message)
		case r.Status == conformance.Skipped && !strings.HasPrefix(r.Name, "instancewatcher/"):
			t.Errorf("%s skipped (%s); minicloud supports everything but the instance watch", r.Name, r.Message)
		}
	}
	if n := len(rep.Results); n != len(conformance.Scenarios()) {
		t.Errorf("%d results, want one per scenario (%d)", n, len(conformance.Scenarios()))
	}
}
