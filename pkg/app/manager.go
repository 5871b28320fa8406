package app

import (
	"context"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	cloudprovider "k8s.io/cloud-provider"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/manager"
)

// Manager runs stratus-ccm's controllers in this process for the
// conformance kit (it implements pkg/conformance.Manager):
//
//	conformance.Run(ctx, conformance.Config{..., Manager: app.Manager{}})
type Manager struct{}

// Run parses args as stratus-ccm's flags and runs the manager until ctx is
// done, logging to the logr.Logger of ctx (discarded when there is none).
func (Manager) Run(ctx context.Context, args []string) error {
	o := manager.NewOptions()
	fs := pflag.NewFlagSet("stratus-ccm", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := logr.FromContextOrDiscard(ctx)
	ctrl.SetLogger(logger)
	return manager.Run(logr.NewContext(ctx, logger), o)
}

// InstancesV2 returns the InstancesV2 answers stratus-ccm assembles from a
// provider's Instances and Zones, with upstream's fallbacks, for a provider
// registered as name that has no InstancesV2.
func (Manager) InstancesV2(name string, raw cloudprovider.Interface) cloudprovider.InstancesV2 {
	return cloud.NewProvider(name, raw)
}
