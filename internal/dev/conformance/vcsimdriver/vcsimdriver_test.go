package vcsimdriver_test

import (
	"context"
	"testing"

	"github.com/stratus-ccm/stratus/internal/dev/conformance/vcsimdriver"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport/conformancetest"
	"github.com/stratus-ccm/stratus/pkg/conformance"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestConformance runs the whole kit against the vSphere provider on a
// simulated vCenter: every instance scenario passes; load balancer and
// route scenarios are skipped because the provider has neither.
func TestConformance(t *testing.T) {
	target, err := vcsimdriver.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	rep := conformancetest.Run(t, target, conformancetest.Want{
		MaySkip: conformancetest.SkipsWith("does not support LoadBalancer", "does not support Routes", "the driver expects no instance type"),
	})
	if rep.Count(conformance.Passed) == 0 {
		t.Error("no scenario passed")
	}
}
