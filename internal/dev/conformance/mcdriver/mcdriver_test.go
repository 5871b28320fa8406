package mcdriver_test

import (
	"context"
	"testing"

	"github.com/stratus-ccm/stratus/internal/dev/conformance/mcdriver"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport/conformancetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestConformance runs the whole kit against the minicloud provider and
// an in-process minicloud: every scenario passes, and only those that
// need what minicloud lacks (the instance watch) are skipped.
func TestConformance(t *testing.T) {
	target, err := mcdriver.StartInProcess(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	conformancetest.Run(t, target, conformancetest.Want{
		MaySkip:      conformancetest.SkipsNamed("instancewatcher/"),
		AllScenarios: true,
	})
}
