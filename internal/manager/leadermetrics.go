package manager

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Leadership as the monitoring sees it. controller-runtime's
// leader_election_master_status exists only with leader election on; these say
// which replica runs the controllers either way, and how often the lease
// changed hands, a count kept in the Lease and so not lost when a replica
// restarts.
var (
	leaderGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stratus_leader",
		Help: "1 while this replica runs the controllers (it holds the lease, or leader election is off), else 0.",
	})
	leaseTransitions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stratus_leader_lease_transitions",
		Help: "The leader changes the lease records (its leaseTransitions), as this replica last read or wrote it; only with leader election.",
	}, []string{"lease"})
)

func init() {
	metrics.Registry.MustRegister(leaderGauge, leaseTransitions)
}
