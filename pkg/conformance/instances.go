package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// instanceScenarios check InstancesV2 (or Instances + Zones) as
// docs/providers.md states it: running, stopped and gone machines, lookups
// by name, and errors that are never "gone" while the cloud fails.
func instanceScenarios() []Scenario {
	return slices.Concat(
		instanceMetadataScenarios(),
		instanceRunningScenarios(),
		instanceStoppedScenarios(),
		instanceDeletedScenarios(),
		instanceByNameScenarios(),
		instanceCloudDownScenarios(),
	)
}

// What instance scenarios need.
var (
	needsInstances = []Need{NeedInstances}
	needsFaults    = []Need{NeedInstances, NeedFaults}
)

// instanceMetadataScenarios check each field of a running machine's metadata.
func instanceMetadataScenarios() []Scenario {
	return []Scenario{
		{Name: "instances/provider-id", Needs: needsInstances, Doc: "InstanceMetadata of a running machine reports the provider ID the driver expects.",
			run: metadataField("provider ID", func(md *cloudprovider.InstanceMetadata) any { return md.ProviderID })},
		{Name: "instances/addresses-in-order", Needs: needsInstances, Doc: "InstanceMetadata of a running machine reports the machine's addresses in the expected order.",
			run: metadataField("addresses", func(md *cloudprovider.InstanceMetadata) any { return md.NodeAddresses })},
		{Name: "instances/instance-type", Needs: needsInstances, Doc: "InstanceMetadata of a running machine reports its instance type.",
			run: metadataField("instance type", func(md *cloudprovider.InstanceMetadata) any { return md.InstanceType })},
		{Name: "instances/zone", Needs: needsInstances, Doc: "InstanceMetadata of a running machine reports its zone.",
			run: metadataField("zone", func(md *cloudprovider.InstanceMetadata) any { return md.Zone })},
		{Name: "instances/region", Needs: needsInstances, Doc: "InstanceMetadata of a running machine reports its region.",
			run: metadataField("region", func(md *cloudprovider.InstanceMetadata) any { return md.Region })},
	}
}

// instanceRunningScenarios check a running machine.
func instanceRunningScenarios() []Scenario {
	return []Scenario{
		{Name: "instances/running-exists", Needs: needsInstances, Doc: "InstanceExists is true for a running machine.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.machine(ctx)
				if err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error { return e.wantExists(ctx, initialized(m), true) })
			}},
		{Name: "instances/running-not-shutdown", Needs: needsInstances, Doc: "InstanceShutdown is false for a running machine.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.machine(ctx)
				if err != nil {
					return err
				}
				if err := e.eventually(ctx, func(ctx context.Context) error { return e.wantExists(ctx, initialized(m), true) }); err != nil {
					return err
				}
				return e.wantShutdown(ctx, initialized(m), false)
			}},
	}
}

// instanceStoppedScenarios check a stopped machine and one started again.
func instanceStoppedScenarios() []Scenario {
	return []Scenario{
		{Name: "instances/stopped-is-shutdown", Needs: needsInstances, Doc: "InstanceShutdown becomes true once the machine is stopped.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.stoppedMachine(ctx)
				if err != nil {
					return err
				}
				return e.wantShutdown(ctx, initialized(m), true)
			}},
		{Name: "instances/stopped-exists", Needs: needsInstances, Doc: "InstanceExists stays true for a stopped machine: stopped is not gone.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.stoppedMachine(ctx)
				if err != nil {
					return err
				}
				return e.wantExists(ctx, initialized(m), true)
			}},
		{Name: "instances/stopped-has-metadata", Needs: needsInstances, Doc: "InstanceMetadata of a stopped machine still reports its provider ID.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.stoppedMachine(ctx)
				if err != nil {
					return err
				}
				md, err := e.inst.InstanceMetadata(ctx, initialized(m))
				if err != nil {
					return fmt.Errorf("InstanceMetadata of stopped machine %s: expected metadata, got error %w", m.Node.Name, err)
				}
				if md == nil || (m.Want.ProviderID != "" && md.ProviderID != m.Want.ProviderID) {
					return expected("InstanceMetadata of stopped machine "+m.Node.Name, m.Want.ProviderID, md)
				}
				return nil
			}},
		{Name: "instances/restarted-not-shutdown", Needs: needsInstances, Doc: "InstanceShutdown is false again once a stopped machine is started.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.stoppedMachine(ctx)
				if err != nil {
					return err
				}
				if err := e.cfg.Driver.StartMachine(ctx, m); err != nil {
					return fmt.Errorf("driver: start machine %s: %w", m.Node.Name, err)
				}
				return e.eventually(ctx, func(ctx context.Context) error { return e.wantShutdown(ctx, initialized(m), false) })
			}},
	}
}

// instanceDeletedScenarios check a deleted machine.
func instanceDeletedScenarios() []Scenario {
	return []Scenario{
		{Name: "instances/deleted-not-exists", Needs: needsInstances, Doc: "InstanceExists becomes false, without an error, once the machine is deleted.",
			run: func(ctx context.Context, e *env) error {
				_, err := e.deletedMachine(ctx)
				return err
			}},
		{Name: "instances/deleted-metadata-not-found", Needs: needsInstances, Doc: "InstanceMetadata of a deleted machine fails with cloudprovider.InstanceNotFound.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.deletedMachine(ctx)
				if err != nil {
					return err
				}
				md, err := e.inst.InstanceMetadata(ctx, initialized(m))
				if !errors.Is(err, cloudprovider.InstanceNotFound) {
					return fmt.Errorf("InstanceMetadata of deleted machine %s: expected an error wrapping cloudprovider.InstanceNotFound, got metadata %v and error %v", m.Node.Name, md, err)
				}
				return nil
			}},
		{Name: "instances/deleted-not-shutdown", Needs: needsInstances, Doc: "InstanceShutdown of a deleted machine is false without an error.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.deletedMachine(ctx)
				if err != nil {
					return err
				}
				return e.wantShutdown(ctx, initialized(m), false)
			}},
	}
}

// instanceByNameScenarios check Nodes found by name, without a provider ID.
func instanceByNameScenarios() []Scenario {
	return []Scenario{
		{Name: "instances/by-name-metadata", Needs: needsInstances, Doc: "InstanceMetadata finds the machine of a Node without a provider ID (first initialization) and reports its provider ID.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.machine(ctx)
				if err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error {
					md, err := e.inst.InstanceMetadata(ctx, m.Node)
					if err != nil {
						return fmt.Errorf("InstanceMetadata of node %s without provider ID: expected metadata, got error %w", m.Node.Name, err)
					}
					if md == nil || md.ProviderID == "" || (m.Want.ProviderID != "" && md.ProviderID != m.Want.ProviderID) {
						return expected("provider ID of node "+m.Node.Name+" without provider ID", m.Want.ProviderID, providerIDOf(md))
					}
					return nil
				})
			}},
		{Name: "instances/by-name-exists", Needs: needsInstances, Doc: "InstanceExists is true for a Node without a provider ID whose machine runs.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.machine(ctx)
				if err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error { return e.wantExists(ctx, m.Node, true) })
			}},
		{Name: "instances/unknown-name-not-exists", Needs: needsInstances, Doc: "InstanceExists is false, without an error, for a Node without a provider ID that names no machine.",
			run: func(ctx context.Context, e *env) error {
				n := &v1.Node{}
				n.Name = e.name() + "-never-created"
				return e.wantExists(ctx, n, false)
			}},
	}
}

// instanceCloudDownScenarios check that a failing cloud never makes a machine gone.
func instanceCloudDownScenarios() []Scenario {
	return []Scenario{
		{Name: "instances/cloud-down-exists-not-gone", Needs: needsFaults, Doc: "While the cloud fails, InstanceExists of a running machine is an error or true, never false.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.brokenWith(ctx)
				if err != nil {
					return err
				}
				ok, err := e.inst.InstanceExists(ctx, initialized(m))
				if err == nil && !ok {
					return fmt.Errorf("InstanceExists of machine %s while the cloud fails: expected an error (or true), got false: the node would be deleted", m.Node.Name)
				}
				return nil
			}},
		{Name: "instances/cloud-down-metadata-not-gone", Needs: needsFaults, Doc: "While the cloud fails, InstanceMetadata of a running machine never fails with InstanceNotFound.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.brokenWith(ctx)
				if err != nil {
					return err
				}
				if _, err := e.inst.InstanceMetadata(ctx, initialized(m)); errors.Is(err, cloudprovider.InstanceNotFound) {
					return fmt.Errorf("InstanceMetadata of machine %s while the cloud fails: expected another error (or metadata), got InstanceNotFound: %v", m.Node.Name, err)
				}
				return nil
			}},
		{Name: "instances/cloud-down-by-name-not-gone", Needs: needsFaults, Doc: "While the cloud fails, InstanceExists of a Node without a provider ID is an error or true, never false.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.brokenWith(ctx)
				if err != nil {
					return err
				}
				ok, err := e.inst.InstanceExists(ctx, m.Node)
				if err == nil && !ok {
					return fmt.Errorf("InstanceExists of node %s (no provider ID) while the cloud fails: expected an error (or true), got false", m.Node.Name)
				}
				return nil
			}},
	}
}

// metadataField checks one field of a running machine's metadata against
// the driver's expectation.
func metadataField(what string, field func(*cloudprovider.InstanceMetadata) any) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		m, err := e.machine(ctx)
		if err != nil {
			return err
		}
		want := field(&m.Want)
		if isZero(want) {
			return skip("the driver expects no %s for its machines", what)
		}
		return e.eventually(ctx, func(ctx context.Context) error {
			md, err := e.inst.InstanceMetadata(ctx, initialized(m))
			if err != nil {
				return fmt.Errorf("InstanceMetadata of machine %s: expected metadata, got error %w", m.Node.Name, err)
			}
			if md == nil {
				return expected("InstanceMetadata of machine "+m.Node.Name, "metadata", "nil")
			}
			if got := field(md); fmt.Sprint(got) != fmt.Sprint(want) {
				return expected(what+" of machine "+m.Node.Name, want, got)
			}
			return nil
		})
	}
}

func isZero(v any) bool {
	switch x := v.(type) {
	case string:
		return x == ""
	case []v1.NodeAddress:
		return len(x) == 0
	}
	return v == nil
}

func providerIDOf(md *cloudprovider.InstanceMetadata) string {
	if md == nil {
		return "no metadata"
	}
	return fmt.Sprintf("%q", md.ProviderID)
}

// wantExists checks InstanceExists of node once.
func (e *env) wantExists(ctx context.Context, node *v1.Node, want bool) error {
	ok, err := e.inst.InstanceExists(ctx, node)
	if err != nil {
		return fmt.Errorf("InstanceExists of node %s: expected %v, got error %w", node.Name, want, err)
	}
	if ok != want {
		return expected("InstanceExists of node "+node.Name, want, ok)
	}
	return nil
}

// wantShutdown waits until InstanceShutdown of node answers want.
func (e *env) wantShutdown(ctx context.Context, node *v1.Node, want bool) error {
	return e.eventually(ctx, func(ctx context.Context) error {
		ok, err := e.inst.InstanceShutdown(ctx, node)
		if err != nil {
			return fmt.Errorf("InstanceShutdown of node %s: expected %v, got error %w", node.Name, want, err)
		}
		if ok != want {
			return expected("InstanceShutdown of node "+node.Name, want, ok)
		}
		return nil
	})
}

// stoppedMachine creates a machine, waits until the provider knows it,
// stops it and waits until the provider reports it shut down.
func (e *env) stoppedMachine(ctx context.Context) (*Machine, error) {
	m, err := e.machine(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.eventually(ctx, func(ctx context.Context) error { return e.wantExists(ctx, initialized(m), true) }); err != nil {
		return nil, err
	}
	if err := e.cfg.Driver.StopMachine(ctx, m); err != nil {
		return nil, fmt.Errorf("driver: stop machine %s: %w", m.Node.Name, err)
	}
	if err := e.wantShutdown(ctx, initialized(m), true); err != nil {
		return nil, err
	}
	return m, nil
}

// deletedMachine creates a machine, waits until the provider knows it,
// deletes it and waits until InstanceExists is false.
func (e *env) deletedMachine(ctx context.Context) (*Machine, error) {
	m, err := e.machine(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.eventually(ctx, func(ctx context.Context) error { return e.wantExists(ctx, initialized(m), true) }); err != nil {
		return nil, err
	}
	if err := e.cfg.Driver.DeleteMachine(ctx, m); err != nil {
		return nil, fmt.Errorf("driver: delete machine %s: %w", m.Node.Name, err)
	}
	err = e.eventually(ctx, func(ctx context.Context) error { return e.wantExists(ctx, initialized(m), false) })
	return m, err
}

// brokenWith creates a machine the provider knows, then makes the cloud
// fail until the scenario ends.
func (e *env) brokenWith(ctx context.Context) (*Machine, error) {
	m, err := e.machine(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.eventually(ctx, func(ctx context.Context) error { return e.wantExists(ctx, initialized(m), true) }); err != nil {
		return nil, err
	}
	if err := e.breakCloud(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// breakCloud makes the cloud fail until the scenario ends.
func (e *env) breakCloud(ctx context.Context) error {
	restore, err := e.faults.BreakCloud(ctx)
	if err != nil {
		return fmt.Errorf("driver: break the cloud: %w", err)
	}
	e.later(func(ctx context.Context) error {
		if err := restore(ctx); err != nil {
			return fmt.Errorf("driver: restore the cloud: %w", err)
		}
		return nil
	})
	return nil
}

// sameAddresses reports whether a and b are equal, in order.
func sameAddresses(a, b []v1.NodeAddress) bool { return slices.Equal(a, b) }
