package manager

import (
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/controller/node"
	"github.com/stratus-ccm/stratus/internal/controller/nodelifecycle"
	"github.com/stratus-ccm/stratus/internal/controller/route"
	"github.com/stratus-ccm/stratus/internal/controller/service"
)

// controllerEntry maps the flags and config onto one controller package's Options
// and calls its Add.
type controllerEntry struct {
	name string
	add  func(mgr manager.Manager, clouds *cloud.Set, o *Options, cfg *ManagerConfig, log logr.Logger) (bool, error)
}

// controllerTable lists the controllers in start order.
var controllerTable = []controllerEntry{
	{CloudNodeController, addNodeController},
	{CloudNodeLifecycleController, addNodeLifecycleController},
	{ServiceLBController, addServiceController},
	{NodeRouteController, addRouteController},
}

// explicit reports whether the command line set the flag. Worker counts are passed
// to the controllers only when set, so that their own defaults (higher than
// upstream's 1, see docs/flags.md) apply otherwise. Options built in code (no
// flag set) pass every value.
func (o *Options) explicit(flag string) bool {
	return o.fs == nil || o.fs.Changed(flag)
}

func addNodeController(mgr manager.Manager, clouds *cloud.Set, o *Options, _ *ManagerConfig, _ logr.Logger) (bool, error) {
	opts := node.Options{StatusUpdateFrequency: o.NodeStatusUpdateFrequency}
	if o.explicit("concurrent-node-syncs") {
		opts.Workers = o.ConcurrentNodeSyncs
	}
	if o.explicit("concurrent-node-status-updates") {
		opts.StatusUpdateWorkers = o.ConcurrentNodeStatusUpdates
	}
	return node.Add(mgr, clouds, opts)
}

func addNodeLifecycleController(mgr manager.Manager, clouds *cloud.Set, o *Options, _ *ManagerConfig, _ logr.Logger) (bool, error) {
	return nodelifecycle.Add(mgr, clouds, nodelifecycle.Options{
		MonitorPeriod:       o.NodeMonitorPeriod,
		DeletionGracePeriod: o.NodeDeletionGracePeriod,
	})
}

func addServiceController(mgr manager.Manager, clouds *cloud.Set, o *Options, cfg *ManagerConfig, _ logr.Logger) (bool, error) {
	opts := service.Options{ClusterName: o.ClusterName, ResyncPeriod: o.LoadBalancerResyncPeriod}
	if o.explicit("concurrent-service-syncs") {
		opts.Workers = o.ConcurrentServiceSyncs
	}
	if cfg != nil {
		if d := cfg.Service.NodeUpdateWindow; d != nil {
			opts.NodeUpdateWindow = d.Duration
		}
		if d := cfg.Service.OrphanGracePeriod; d != nil {
			opts.OrphanGracePeriod = d.Duration
		}
	}
	return service.Add(mgr, clouds, opts)
}

func addRouteController(mgr manager.Manager, clouds *cloud.Set, o *Options, cfg *ManagerConfig, log logr.Logger) (bool, error) {
	if !o.ConfigureCloudRoutes {
		log.Info("route controller not started: --configure-cloud-routes=false")
		return false, nil
	}
	cidrs, err := o.clusterCIDRs()
	if err != nil {
		return false, err
	}
	opts := route.Options{ClusterName: o.ClusterName, ClusterCIDRs: cidrs, ReconciliationPeriod: o.RouteReconciliationPeriod}
	if cfg != nil {
		if d := cfg.Route.ResyncPeriod; d != nil {
			opts.ResyncPeriod = d.Duration
		}
		opts.MaxConcurrentOps = cfg.Route.MaxConcurrentOps
	}
	return route.Add(mgr, clouds, opts)
}
