package driverbase_test

import (
	"context"
	"testing"

	"github.com/stratus-ccm/stratus/internal/dev/conformance/driverbase"
	"github.com/stratus-ccm/stratus/pkg/conformance"
)

// Both drivers refuse a cloud config, saying what they start instead, and
// the in-process one is the Target Start returns.
func TestRegister(t *testing.T) {
	started := 0
	driverbase.Simulated{
		Name: "driverbase-test", UpstreamName: "driverbase-test-upstream", Label: "test driver",
		Starts: "its own cloud", Bin: "none", MakeTarget: "none", UpstreamTarget: "test upstream",
		Start: func(context.Context) (*conformance.Target, error) {
			started++
			return &conformance.Target{Provider: "test"}, nil
		},
	}.Register()
	ctx := context.Background()
	for _, name := range []string{"driverbase-test", "driverbase-test-upstream"} {
		_, err := conformance.NewTarget(ctx, name, conformance.DriverOptions{CloudConfig: []byte("x")})
		want := "test driver: a cloud config was given, but the driver starts its own cloud"
		if err == nil || err.Error() != want {
			t.Errorf("%s with a cloud config: got %v, want %q", name, err, want)
		}
	}
	if started != 0 {
		t.Errorf("Start was called %d times for refused drivers", started)
	}
	tg, err := conformance.NewTarget(ctx, "driverbase-test", conformance.DriverOptions{})
	if err != nil || tg.Provider != "test" || started != 1 {
		t.Errorf("driverbase-test: got %+v, %v (started %d); want Start's target", tg, err, started)
	}
}
