package route

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Outcomes of a reconcile, the outcome label of route_controller_route_sync_total.
const (
	outcomeChanged = "changed" // at least one route was created or deleted
	outcomeNoop    = "noop"
	outcomeError   = "error" // listing failed, or a route or condition could not be written
)

// syncTotal is upstream's route_controller_route_sync_total, with upstream's
// labels and one more trigger value, recovered.
var syncTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "route_controller_route_sync_total",
	Help: "Route reconciles with the cloud provider, by trigger (node_change, periodic, or recovered: run at once when the provider answered again after an outage that made the last reconcile fail) and outcome (changed if a route was created or deleted, error if the reconcile failed, otherwise noop).",
}, []string{"outcome", "trigger"})

func init() {
	metrics.Registry.MustRegister(syncTotal)
}

func recordSync(trigger string, changed bool, err error) {
	outcome := outcomeNoop
	switch {
	case err != nil:
		outcome = outcomeError
	case changed:
		outcome = outcomeChanged
	}
	syncTotal.WithLabelValues(outcome, trigger).Inc()
}
