package service

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stratus-ccm/stratus/internal/controller/statemetrics"
)

// Upstream's service controller metrics keep their names (subsystem
// service_controller); stratus's own start with stratus_service_.
var (
	lbSyncTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "service_controller_loadbalancer_sync_total",
		Help: "Times any load balancer's backends were configured as an effect of node changes.",
	})
	nodeSyncErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "service_controller_nodesync_error_total",
		Help: "Backend updates after node changes that failed.",
	})
	nodeSyncLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "service_controller_nodesync_latency_seconds",
		Help:    "Duration of one coalesced backend update pass over all load balancers.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 15),
	})
	updateHostLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "service_controller_update_loadbalancer_host_latency_seconds",
		Help:    "Duration of one UpdateLoadBalancer call.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 15),
	})
	provisioningLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stratus_service_provisioning_latency_seconds",
		Help:    "Time from the controller first ensuring a Service's load balancer to the Service getting its ingress.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 14),
	}, []string{"provider"})
	backendBatches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "stratus_service_backend_update_batches_total",
		Help: "Coalesced backend update passes that changed at least one load balancer's backend set.",
	})
	poolUpdates = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "stratus_service_backend_pool_updates_total",
		Help: "Backend pool updates (UpdateBackendPool) that succeeded, each standing in for an UpdateLoadBalancer of every load balancer targeting the pool.",
	})
	orphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_service_orphan_load_balancers_deleted_total",
		Help: "Load balancers of this cluster deleted because their Service no longer exists.",
	}, []string{"provider"})
	driftRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_service_drift_repairs_total",
		Help: "Load balancers re-ensured because the periodic check found them missing or different.",
	}, []string{"provider", "reason"})
	loadBalancerStates = statemetrics.New("stratus_service_load_balancers",
		"LoadBalancer Services this manager serves, by provider and state (provisioning, ready, no_backends, failing, invalid), from their LoadBalancerReady condition.",
		"Seconds since the oldest LoadBalancer Service in the state entered it (its LoadBalancerReady condition's last transition; for one without the condition, its creation).")
)

func init() {
	ctrlmetrics.Registry.MustRegister(lbSyncTotal, nodeSyncErrors, nodeSyncLatency, updateHostLatency,
		provisioningLatency, backendBatches, poolUpdates, orphansDeleted, driftRepairs, loadBalancerStates)
}

// States of a LoadBalancer Service, the state label of
// stratus_service_load_balancers.
const (
	stateProvisioning = "provisioning"
	stateReady        = "ready"
	stateNoBackends   = "no_backends"
	stateFailing      = "failing"
	stateInvalid      = "invalid"
)

// LoadBalancerState returns the state of svc's load balancer, as
// stratus_service_load_balancers names it (provisioning, ready, no_backends,
// failing, invalid), and since when it is in it, from its LoadBalancerReady
// condition (a Service without the condition is provisioning since its
// creation).
func LoadBalancerState(svc *v1.Service) (string, metav1.Time) {
	cond := meta.FindStatusCondition(svc.Status.Conditions, ConditionLoadBalancerReady)
	if cond == nil {
		return stateProvisioning, svc.CreationTimestamp
	}
	state := stateProvisioning
	switch cond.Reason {
	case ReasonReady:
		state = stateReady
	case ReasonNoBackends:
		state = stateNoBackends
	case ReasonCloudError:
		state = stateFailing
	case ReasonInvalidConfiguration:
		state = stateInvalid
	}
	return state, cond.LastTransitionTime
}

// loadBalancerEntries lists the LoadBalancer Services this controller serves
// from the manager's cache, for stratus_service_load_balancers.
func (c *Controller) loadBalancerEntries(ctx context.Context) ([]statemetrics.Entry, error) {
	var list v1.ServiceList
	// Read only: the cache's own objects, not copies.
	if err := c.client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []statemetrics.Entry
	for i := range list.Items {
		svc := &list.Items[i]
		if !wantsLB(svc) || svc.DeletionTimestamp != nil {
			continue
		}
		p := c.clouds.ForService(svc)
		if p == nil || !supportsLB(p) {
			continue
		}
		state, since := LoadBalancerState(svc)
		out = append(out, statemetrics.Entry{Provider: p.Name(), State: state, Since: since.Time})
	}
	return out, nil
}
