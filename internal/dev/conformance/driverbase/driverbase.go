// Package driverbase is what the conformance drivers of simulated clouds
// share (osdriver, vcsimdriver): each starts a simulator of its own, so it
// refuses a cloud config, and each is registered twice, for stratus's
// provider in process and for the upstream provider, unchanged, served as
// a plugin by a binary of hack/kubebins.
package driverbase

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/pkg/conformance"
	"github.com/stratus-ccm/stratus/pkg/conformance/plugindriver"
)

// Simulated is a conformance driver that always starts its own simulated
// cloud.
type Simulated struct {
	// Name is the driver of stratus's provider in process; UpstreamName
	// is the driver of the upstream provider served as a plugin.
	Name, UpstreamName string
	// Label starts the driver's errors: "openstack driver".
	Label string
	// Starts says what Start starts, for the error of a cloud config
	// given: "its own simulated vCenter and writes the cloud config for
	// it".
	Starts string
	// Bin is the hack/kubebins binary that serves the upstream provider
	// as a plugin, and MakeTarget the make target that builds it.
	Bin, MakeTarget string
	// UpstreamTarget names the upstream provider's runs in reports.
	UpstreamTarget string
	// Start starts the simulated cloud and returns its Target, for
	// stratus's provider.
	Start func(context.Context) (*conformance.Target, error)
}

// Register registers the drivers Name and UpstreamName.
func (s Simulated) Register() {
	conformance.RegisterDriver(s.Name, s.target)
	conformance.RegisterDriver(s.UpstreamName, s.upstreamTarget)
}

func (s Simulated) target(ctx context.Context, o conformance.DriverOptions) (*conformance.Target, error) {
	if err := s.noCloudConfig(o); err != nil {
		return nil, err
	}
	return s.Start(ctx)
}

func (s Simulated) upstreamTarget(ctx context.Context, o conformance.DriverOptions) (*conformance.Target, error) {
	if err := s.noCloudConfig(o); err != nil {
		return nil, err
	}
	bin, err := testenv.Kubebin(s.Bin, s.MakeTarget)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Label, err)
	}
	t, err := s.Start(ctx)
	if err != nil {
		return nil, err
	}
	t.Name = s.UpstreamTarget
	return plugindriver.Exec(ctx, t, o.KubeConfig, bin, "plugin", "serve")
}

func (s Simulated) noCloudConfig(o conformance.DriverOptions) error {
	if len(o.CloudConfig) != 0 {
		return errors.New(s.Label + ": a cloud config was given, but the driver starts " + s.Starts)
	}
	return nil
}
