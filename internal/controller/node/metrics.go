package node

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stratus-ccm/stratus/internal/controller/statemetrics"
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
	nodeStates = statemetrics.New("stratus_nodes",
		"Nodes of the providers with instances, by provider and state (uninitialized while they carry the cloud provider's uninitialized taint, else initialized).",
		"Seconds since the oldest uninitialized node was created (only for state uninitialized).")
)

// States of a node, the state label of stratus_nodes.
const (
	stateUninitialized = "uninitialized"
	stateInitialized   = "initialized"
)

func init() {
	metrics.Registry.MustRegister(taintRemovalDelay, initialSyncDelay, initFailures, addressUpdates, nodeStates)
}

// nodeEntries lists the nodes of the providers with instances from the
// manager's cache, for stratus_nodes.
func (r *reconciler) nodeEntries(ctx context.Context) ([]statemetrics.Entry, error) {
	var nodes v1.NodeList
	// Read only: the cache's own objects, not copies.
	if err := r.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]statemetrics.Entry, 0, len(nodes.Items))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		p := r.clouds.ForNode(n)
		if p == nil || !p.HasInstances() {
			continue
		}
		e := statemetrics.Entry{Provider: p.Name(), State: stateInitialized}
		if hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) {
			e.State, e.Since = stateUninitialized, n.CreationTimestamp.Time
		}
		out = append(out, e)
	}
	return out, nil
}
