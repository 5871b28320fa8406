package mcdriver_test

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/stratus-ccm/stratus/internal/dev/conformance/mcdriver"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/pkg/app"
	"github.com/stratus-ccm/stratus/pkg/conformance"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
)

// goneOnErrorName is the minicloud provider with one contract violation:
// InstanceExists answers "gone" when the cloud fails.
const goneOnErrorName = "minicloud-gone-on-error"

func init() {
	cloudprovider.RegisterCloudProvider(goneOnErrorName, func(r io.Reader) (cloudprovider.Interface, error) {
		cfg, err := mcprovider.ParseConfig(r)
		if err != nil {
			return nil, err
		}
		c, err := mcprovider.New(cfg)
		if err != nil {
			return nil, err
		}
		return goneOnError{c}, nil
	})
}

type goneOnError struct{ cloudprovider.Interface }

func (g goneOnError) InstancesV2() (cloudprovider.InstancesV2, bool) {
	v2, ok := g.Interface.InstancesV2()
	return goneV2{v2}, ok
}

type goneV2 struct{ cloudprovider.InstancesV2 }

func (g goneV2) InstanceExists(ctx context.Context, n *v1.Node) (bool, error) {
	ok, err := g.InstancesV2.InstanceExists(ctx, n)
	return ok && err == nil, nil
}

// The kit catches a provider that calls a machine gone when the cloud
// fails, and says what it expected and what came.
func TestDetectsGoneOnError(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	target, err := mcdriver.StartInProcess(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(target.Close)
	rep, err := conformance.Run(ctx, conformance.Config{
		Provider:    goneOnErrorName,
		CloudConfig: target.CloudConfig,
		Driver:      target.Driver,
		KubeConfig:  env.Config,
		Manager:     app.Manager{},
		ClusterName: "cf-" + env.Namespace(t),
		Focus:       regexp.MustCompile(`^instances/(cloud-down-exists-not-gone|running-exists)$`),
	})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	conformance.WriteTable(&table, rep)
	got := map[string]conformance.Result{}
	for _, r := range rep.Results {
		got[r.Name] = r
	}
	if r := got["instances/running-exists"]; r.Status != conformance.Passed {
		t.Errorf("running-exists: %s %s; want pass\n%s", r.Status, r.Message, table.String())
	}
	r := got["instances/cloud-down-exists-not-gone"]
	if r.Status != conformance.Failed || !strings.Contains(r.Message, "expected an error (or true), got false") {
		t.Errorf("cloud-down-exists-not-gone: %s %q; want a failure saying false came\n%s", r.Status, r.Message, table.String())
	}
	if !rep.Failed() {
		t.Error("Report.Failed() is false")
	}
}
