package cloud

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Outcomes of a cloud call, the "outcome" label of stratus_cloud_requests_total.
const (
	OutcomeSuccess              = "success"
	OutcomeError                = "error"
	OutcomeNotFound             = "not_found"
	OutcomeNotImplemented       = "not_implemented"
	OutcomeImplementedElsewhere = "implemented_elsewhere"
	OutcomeRetryLater           = "retry_later"
	OutcomeThrottled            = "throttled"
	OutcomeTransient            = "transient_error"
	OutcomeCanceled             = "canceled"
)

var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_cloud_requests_total",
		Help: "Cloud provider calls made by the cloud layer, by configured provider, method and outcome. Each retry counts as a call.",
	}, []string{"provider", "method", "outcome"})

	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stratus_cloud_request_duration_seconds",
		Help:    "Duration of cloud provider calls (without time spent waiting for the request budget).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"provider", "method"})

	budgetWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stratus_cloud_budget_wait_seconds",
		Help:    "Time cloud calls waited for the provider's request budget, by priority class.",
		Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"provider", "priority"})

	throttledTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_cloud_throttled_total",
		Help: "Cloud calls the provider reported as throttled (HTTP 429 or equivalent); each pauses the provider's budget.",
	}, []string{"provider"})

	cacheHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_cloud_instance_cache_hits_total",
		Help: "Instance lookups answered from a fresh instance listing without a cloud call.",
	}, []string{"provider"})

	cacheMisses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_cloud_instance_cache_misses_total",
		Help: "Instance lookups that needed an instance listing (coalesced with concurrent ones).",
	}, []string{"provider"})

	recoveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_cloud_recoveries_total",
		Help: "Times a provider answered again after an outage (several calls in a row failed with transient or throttling errors); each retries at once what failed during the outage.",
	}, []string{"provider"})

	watchRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stratus_cloud_instance_watch_restarts_total",
		Help: "Times a provider's instance watch stopped with an error and was restarted.",
	}, []string{"provider"})

	budgets = &budgetCollector{
		available: prometheus.NewDesc("stratus_cloud_budget_available",
			"Requests the provider's token bucket allows right now (its burst when idle; +Inf when unlimited).",
			[]string{"provider"}, nil),
		queued: prometheus.NewDesc("stratus_cloud_budget_queued",
			"Calls waiting for the provider's request budget, by priority class.",
			[]string{"provider", "priority"}, nil),
		down: prometheus.NewDesc("stratus_cloud_provider_down",
			"1 while the provider is in an outage (its last calls in a row failed with transient or throttling errors), else 0.",
			[]string{"provider"}, nil),
		pluginConnected: prometheus.NewDesc("stratus_cloud_plugin_connected",
			"For a provider served by a plugin process: 1 while the manager's connection to the plugin is up, else 0.",
			[]string{"provider"}, nil),
		byName: map[string]*Provider{},
	}
)

func init() {
	metrics.Registry.MustRegister(requestsTotal, requestDuration, budgetWait, throttledTotal, cacheHits, cacheMisses, recoveries, watchRestarts, budgets)
}

// budgetCollector reports each provider's available tokens, queue and health
// at scrape time, so the gauges show the bucket refilling while no calls are
// made and a plugin's connection as it is now.
type budgetCollector struct {
	available       *prometheus.Desc
	queued          *prometheus.Desc
	down            *prometheus.Desc
	pluginConnected *prometheus.Desc
	mu              sync.Mutex
	byName          map[string]*Provider
}

// connector is a provider whose connection can be down while the process
// runs: a plugin client.
type connector interface{ Connected() bool }

// track makes name's gauges report p (the newest provider of that name wins).
func (c *budgetCollector) track(name string, p *Provider) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byName[name] = p
}

// Describe implements prometheus.Collector.
func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.available
	ch <- c.queued
	ch <- c.down
	ch <- c.pluginConnected
}

// Collect implements prometheus.Collector.
func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.byName {
		b := p.budget
		ch <- prometheus.MustNewConstMetric(c.available, prometheus.GaugeValue, b.available(), name)
		for prio, n := range b.queued() {
			ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(n), name, Priority(prio).String())
		}
		ch <- prometheus.MustNewConstMetric(c.down, prometheus.GaugeValue, boolValue(p.down()), name)
		if pc, ok := p.raw.(connector); ok {
			ch <- prometheus.MustNewConstMetric(c.pluginConnected, prometheus.GaugeValue, boolValue(pc.Connected()), name)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
