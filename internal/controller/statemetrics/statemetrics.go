// Package statemetrics reports, at scrape time, how many of a controller's
// objects are in each state and how long the oldest has been in it, read from
// the manager's informer cache: the load balancers provisioning, failing or
// ready, the nodes waiting for initialization. A counter of failures says that
// something went wrong; these say what is wrong now and for how long, which is
// what an alert on "stuck" needs.
package statemetrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// listTimeout bounds one scrape's read of the cache; a cache that is not
// synced yet yields no samples rather than a hanging scrape.
const listTimeout = 2 * time.Second

// Entry is one object's state.
type Entry struct {
	// Provider is the name of the provider that serves the object.
	Provider string
	// State is the object's state, the state label.
	State string
	// Since is when the object entered State; zero when unknown, and then
	// the object counts but is not the oldest.
	Since time.Time
}

// Lister returns the entries of the objects as they are now.
type Lister func(ctx context.Context) ([]Entry, error)

// Collector is a prometheus.Collector of two gauges, by provider and state:
// the number of objects, and the age in seconds of the oldest in its state.
type Collector struct {
	count  *prometheus.Desc
	oldest *prometheus.Desc

	mu    sync.Mutex
	list  Lister
	clock clock.PassiveClock
}

// New returns a collector of the gauges name and name_oldest_seconds.
func New(name, help, oldestHelp string) *Collector {
	labels := []string{"provider", "state"}
	return &Collector{
		count:  prometheus.NewDesc(name, help, labels, nil),
		oldest: prometheus.NewDesc(name+"_oldest_seconds", oldestHelp, labels, nil),
	}
}

// Track makes the collector report what list returns, with ages measured on
// clk. The newest call wins: in a process there is one running controller of
// each kind (tests build several in turn).
func (c *Collector) Track(list Lister, clk clock.PassiveClock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list, c.clock = list, clk
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.oldest
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	list, clk := c.list, c.clock
	c.mu.Unlock()
	if list == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	entries, err := list(ctx)
	if err != nil {
		return
	}
	type key struct{ provider, state string }
	counts := map[key]int{}
	oldest := map[key]time.Time{}
	for _, e := range entries {
		k := key{e.Provider, e.State}
		counts[k]++
		if o, ok := oldest[k]; !e.Since.IsZero() && (!ok || e.Since.Before(o)) {
			oldest[k] = e.Since
		}
	}
	now := clk.Now()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n), k.provider, k.state)
		if since, ok := oldest[k]; ok {
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, max(now.Sub(since).Seconds(), 0), k.provider, k.state)
		}
	}
}
