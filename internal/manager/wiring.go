package manager

import (
	"time"

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
	add  func(mgr manager.Manager, clouds *cloud.Set, o *Options, cfg *Config, log logr.Logger) (bool, error)
}

// controllerTable lists the controllers in start order.
var controllerTable = []controllerEntry{
	{CloudNodeController, addNodeController},
	{CloudNodeLifecycleController, addNodeLifecycleController},
	{ServiceLBController, addServiceController},
	{NodeRouteController, addRouteController},
}

func addNodeController(mgr manager.Manager, clouds *cloud.Set, o *Options, _ *Config, _ logr.Logger) (bool, error) {
	return node.Add(mgr, clouds, node.Options{
		Workers:               o.ConcurrentNodeSyncs,
		StatusUpdateWorkers:   o.ConcurrentNodeStatusUpdates,
		StatusUpdateFrequency: o.NodeStatusUpdateFrequency,
	})
}

func addNodeLifecycleController(mgr manager.Manager, clouds *cloud.Set, o *Options, cfg *Config, _ logr.Logger) (bool, error) {
	opts := nodelifecycle.Options{
		MonitorPeriod:       o.NodeMonitorPeriod,
		DeletionGracePeriod: o.NodeDeletionGracePeriod,
	}
	if cfg != nil {
		nl := cfg.NodeLifecycle
		opts.DeletionBudgetPercent, opts.DeletionBudgetMin = nl.DeletionBudgetPercent, nl.DeletionBudgetMin
		if nl.DeletionBudgetWindow != nil {
			opts.DeletionBudgetWindow = nl.DeletionBudgetWindow.Duration
		}
		opts.ConfirmationInterval = longestCacheFreshness(cfg.Providers)
	}
	return nodelifecycle.Add(mgr, clouds, opts)
}

// longestCacheFreshness is the longest instance-cache freshness of the providers,
// so that the lifecycle controller's two "does not exist" answers never come from
// the same cached listing. Zero leaves the controller's default (the cache's).
func longestCacheFreshness(providers []cloud.ProviderConfig) time.Duration {
	var longest time.Duration
	for _, p := range providers {
		f := cloud.DefaultInstanceCacheFreshness
		if p.InstanceCacheFreshness != nil {
			f = p.InstanceCacheFreshness.Duration
		}
		longest = max(longest, f)
	}
	return longest
}

func addServiceController(mgr manager.Manager, clouds *cloud.Set, o *Options, cfg *Config, _ logr.Logger) (bool, error) {
	opts := service.Options{ClusterName: o.ClusterName, ResyncPeriod: o.LoadBalancerResyncPeriod, Workers: o.ConcurrentServiceSyncs}
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

func addRouteController(mgr manager.Manager, clouds *cloud.Set, o *Options, cfg *Config, log logr.Logger) (bool, error) {
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
