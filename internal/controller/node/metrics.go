package node

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Upstream's initialization histograms, with upstream's names and buckets
// (1s to ~17m).
var (
	taintRemovalDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "node_controller_cloud_provider_taint_removal_delay_seconds",
		Help:    "Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 6),
	})
	initialSyncDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "node_controller_initial_node_sync_delay_seconds",
		Help:    "Number of seconds after node creation when NodeController finished the initial synchronization of a single node.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 6),
	})
	// initFailures counts failed initialization attempts, by provider and cause.
	initFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_node_initialization_failures_total",
		Help: "Failed node initialization attempts, by provider and cause (metadata, provider_id, provided_node_ip, write).",
	}, []string{"provider", "cause"})
	// addressUpdates counts address refreshes that changed a node's addresses.
	addressUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_node_address_updates_total",
		Help: "Node address lists rewritten by the cloud node controller, by provider and path (init or refresh).",
	}, []string{"provider", "path"})
)

func init() {
	metrics.Registry.MustRegister(taintRemovalDelay, initialSyncDelay, initFailures, addressUpdates)
}
