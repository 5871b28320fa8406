package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// listerScenarios check stratus.InstanceLister and stratus.InstanceWatcher: a
// listing agrees with the per-node answers and the feed reports changes.
func listerScenarios() []Scenario {
	return slices.Concat(
		instanceListerMetadataScenarios(),
		instanceListerChangeScenarios(),
		instanceWatcherScenarios(),
	)
}

// What the instance lister's and watcher's scenarios need.
var (
	needsInstanceLister  = []Need{NeedInstances, NeedInstanceLister}
	needsInstanceWatcher = []Need{NeedInstances, NeedInstanceWatcher}
)

// instanceListerMetadataScenarios check the metadata stratus.InstanceLister lists.
func instanceListerMetadataScenarios() []Scenario {
	return []Scenario{
		{Name: "instancelister/metadata-matches", Needs: needsInstanceLister, Doc: "A listed machine carries the same metadata InstanceMetadata reports for its Node.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.machine(ctx)
				if err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error {
					in, err := e.listed(ctx, m)
					if err != nil {
						return err
					}
					md, err := e.inst.InstanceMetadata(ctx, initialized(m))
					if err != nil {
						return fmt.Errorf("InstanceMetadata of machine %s: %w", m.Node.Name, err)
					}
					if in.Metadata.ProviderID != md.ProviderID || !sameAddresses(in.Metadata.NodeAddresses, md.NodeAddresses) ||
						in.Metadata.InstanceType != md.InstanceType || in.Metadata.Zone != md.Zone || in.Metadata.Region != md.Region {
						return expected("listed metadata of machine "+m.Node.Name, fmt.Sprintf("%+v", *md), fmt.Sprintf("%+v", in.Metadata))
					}
					return nil
				})
			}},
		{Name: "instancelister/matches-node-name", Needs: needsInstanceLister, Doc: "A listed machine names its Node by Name, Hostnames or SystemUUIDs, so a Node without a provider ID finds it.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.machine(ctx)
				if err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error {
					in, err := e.listed(ctx, m)
					if err != nil {
						return err
					}
					uuid := m.Node.Status.NodeInfo.SystemUUID
					if in.Name == m.Node.Name || slices.Contains(in.Hostnames, m.Node.Name) ||
						(uuid != "" && slices.ContainsFunc(in.SystemUUIDs, func(u string) bool { return strings.EqualFold(u, uuid) })) {
						return nil
					}
					return expected("listed machine "+in.Metadata.ProviderID+" to name node "+m.Node.Name,
						"Name, Hostnames or SystemUUIDs to match", fmt.Sprintf("Name %q, Hostnames %v, SystemUUIDs %v", in.Name, in.Hostnames, in.SystemUUIDs))
				})
			}},
	}
}

// instanceListerChangeScenarios check the list after machines stop or go and while the cloud fails.
func instanceListerChangeScenarios() []Scenario {
	return []Scenario{
		{Name: "instancelister/stopped-is-shutdown", Needs: needsInstanceLister, Doc: "A stopped machine is listed with Shutdown, as InstanceShutdown reports.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.stoppedMachine(ctx)
				if err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error {
					in, err := e.listed(ctx, m)
					if err != nil {
						return err
					}
					if !in.Shutdown {
						return expected("Shutdown of listed stopped machine "+m.Node.Name, true, false)
					}
					return nil
				})
			}},
		{Name: "instancelister/deleted-not-listed", Needs: needsInstanceLister, Doc: "A deleted machine is no longer listed.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.deletedMachine(ctx)
				if err != nil {
					return err
				}
				return e.eventually(ctx, func(ctx context.Context) error {
					all, err := e.lister.ListInstances(ctx)
					if err != nil {
						return fmt.Errorf("ListInstances: %w", err)
					}
					if i := indexOf(all, m); i >= 0 {
						return expected("listing after deleting machine "+m.Node.Name, "no entry", fmt.Sprintf("%+v", all[i]))
					}
					return nil
				})
			}},
		{Name: "instancelister/cloud-down-no-partial-list", Needs: []Need{NeedInstances, NeedInstanceLister, NeedFaults}, Doc: "While the cloud fails, ListInstances returns an error or a listing with every machine, never one without a machine that exists.",
			run: func(ctx context.Context, e *env) error {
				m, err := e.machine(ctx)
				if err != nil {
					return err
				}
				if err := e.eventually(ctx, func(ctx context.Context) error { _, err := e.listed(ctx, m); return err }); err != nil {
					return err
				}
				if err := e.breakCloud(ctx); err != nil {
					return err
				}
				all, err := e.lister.ListInstances(ctx)
				if err == nil && indexOf(all, m) < 0 {
					return fmt.Errorf("ListInstances while the cloud fails: expected an error or machine %s listed, got a listing of %d without it", m.Node.Name, len(all))
				}
				return nil
			}},
	}
}

// instanceWatcherScenarios check stratus.InstanceWatcher.
func instanceWatcherScenarios() []Scenario {
	return []Scenario{
		{Name: "instancewatcher/reports-stop", Needs: needsInstanceWatcher, Doc: "WatchInstances calls changed after a machine is stopped.",
			run: watchReports(func(ctx context.Context, e *env, m *Machine) error { return e.cfg.Driver.StopMachine(ctx, m) })},
		{Name: "instancewatcher/reports-delete", Needs: needsInstanceWatcher, Doc: "WatchInstances calls changed after a machine is deleted.",
			run: watchReports(func(ctx context.Context, e *env, m *Machine) error { return e.cfg.Driver.DeleteMachine(ctx, m) })},
	}
}

// watchReports checks that the instance watch calls changed after op.
func watchReports(op func(context.Context, *env, *Machine) error) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		m, err := e.machine(ctx)
		if err != nil {
			return err
		}
		var calls atomic.Int64
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.watcher.WatchInstances(wctx, func() { calls.Add(1) }) }()
		defer func() { cancel(); <-done }()
		// The watch has seen the machine once a listing has it.
		if err := e.eventually(ctx, func(ctx context.Context) error { _, err := e.listed(ctx, m); return err }); err != nil {
			return err
		}
		before := calls.Load()
		if err := op(ctx, e, m); err != nil {
			return fmt.Errorf("driver: change machine %s: %w", m.Node.Name, err)
		}
		return e.eventually(ctx, func(context.Context) error {
			select {
			case err := <-done:
				done <- err
				return fmt.Errorf("WatchInstances returned early: %v", err)
			default:
			}
			if calls.Load() == before {
				return expected("calls of changed after the change of machine "+m.Node.Name, "at least one", 0)
			}
			return nil
		})
	}
}

// listed returns m's entry in a listing.
func (e *env) listed(ctx context.Context, m *Machine) (*stratus.Instance, error) {
	all, err := e.lister.ListInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("ListInstances: expected a listing, got error %w", err)
	}
	i := indexOf(all, m)
	if i < 0 {
		return nil, expected("machine "+m.Node.Name+" in a listing of "+fmt.Sprint(len(all)), "an entry with provider ID "+m.Want.ProviderID+" or its name", "none")
	}
	return &all[i], nil
}

// indexOf finds m in a listing by provider ID, else by name.
func indexOf(all []stratus.Instance, m *Machine) int {
	if m.Want.ProviderID != "" {
		if i := slices.IndexFunc(all, func(in stratus.Instance) bool { return in.Metadata.ProviderID == m.Want.ProviderID }); i >= 0 {
			return i
		}
	}
	return slices.IndexFunc(all, func(in stratus.Instance) bool { return in.Name == m.Node.Name })
}
