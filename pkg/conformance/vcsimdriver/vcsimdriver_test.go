package vcsimdriver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/internal/testenv"
	"github.com/stratus-ccm/stratus/pkg/conformance"
	"github.com/stratus-ccm/stratus/pkg/conformance/vcsimdriver"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestConformance runs the whole kit against the vSphere provider on a
// simulated vCenter: every instance scenario passes; load balancer and
// route scenarios are skipped because the provider has neither.
func TestConformance(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	target, err := vcsimdriver.Start(ctx)
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
		unsupported := strings.Contains(r.Message, "does not support LoadBalancer") || strings.Contains(r.Message, "does not support Routes") ||
			strings.Contains(r.Message, "the driver expects no instance type")
		switch {
		case r.Status == conformance.Failed:
			t.Errorf("%s: %s", r.Name, r.Message)
		case r.Status == conformance.Skipped && !unsupported:
			t.Errorf("%s skipped (%s); want it run", r.Name, r.Message)
		}
	}
	if rep.Count(conformance.Passed) == 0 {
		t.Error("no scenario passed")
	}
}
