package service

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
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
	orphansDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_service_orphan_load_balancers_deleted_total",
		Help: "Load balancers of this cluster deleted because their Service no longer exists.",
	}, []string{"provider"})
	driftRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_service_drift_repairs_total",
		Help: "Load balancers re-ensured because the periodic check found them missing or different.",
	}, []string{"provider", "reason"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(lbSyncTotal, nodeSyncErrors, nodeSyncLatency, updateHostLatency,
		provisioningLatency, backendBatches, orphansDeleted, driftRepairs)
}
