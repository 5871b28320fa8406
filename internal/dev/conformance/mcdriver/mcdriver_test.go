package mcdriver_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/stratus-ccm/stratus/internal/dev/conformance/mcdriver"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport/conformancetest"
	"github.com/stratus-ccm/stratus/pkg/conformance"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestConformance runs the whole kit against the minicloud provider and
// an in-process minicloud: every scenario passes, and only those that
// need what minicloud lacks (the instance watch) or what its config leaves
// off (backend pools, TestConformanceBackendPools) are skipped.
func TestConformance(t *testing.T) {
	target, err := mcdriver.StartInProcess(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	conformancetest.Run(t, target, conformancetest.Want{
		MaySkip:      conformancetest.SkipsNamed("instancewatcher/", "backendpools/"),
		AllScenarios: true,
	})
}

// TestConformanceBackendPools runs the backend pool and load balancer
// scenarios (and the backends digest's, which pools change) with the
// provider's backend pools on (backendPools: true):
// every one passes.
func TestConformanceBackendPools(t *testing.T) {
	target, err := mcdriver.StartInProcess(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	target.CloudConfig = append(target.CloudConfig, "backendPools: true\n"...)
	rep := conformancetest.Run(t, target, conformancetest.Want{
		Focus: regexp.MustCompile(`^(backendpools|loadbalancers)/|^loadbalancerlister/backends-digest$`),
	})
	if n := rep.Count(conformance.Passed); n < 3 {
		t.Errorf("%d scenarios passed, want at least the three backend pool scenarios", n)
	}
}
