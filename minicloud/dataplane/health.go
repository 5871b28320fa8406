package dataplane

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

type checkKey struct {
	addr netip.Addr
	hc   HealthCheck
}

// checker probes one target on its interval until stopped.
type checker struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	state  Health
	streak int // consecutive probe results disagreeing with state
}

func (p *Plane) startChecker(k checkKey) *checker {
	ctx, cancel := context.WithCancel(p.ctx)
	c := &checker{cancel: cancel, done: make(chan struct{}), state: Health{State: "unknown", Reason: "not probed yet"}}
	timeout := k.hc.Timeout
	if timeout <= 0 {
		timeout = min(k.hc.Interval, 2*time.Second)
	}
	opts := p.opts
	if k.hc.UnhealthyThreshold > 0 {
		opts.UnhealthyThreshold = k.hc.UnhealthyThreshold
	}
	go func() {
		defer close(c.done)
		t := time.NewTicker(k.hc.Interval)
		defer t.Stop()
		for {
			err := p.probe(ctx, k, timeout)
			if ctx.Err() != nil {
				return
			}
			c.record(err, opts)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return c
}

func (c *checker) stop() {
	c.cancel()
	<-c.done
}

func (c *checker) current() Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// record applies one probe result: the first result decides directly, later
// ones need threshold consecutive disagreeing results.
func (c *checker) record(err error, opts Options) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := Health{State: "healthy"}
	threshold := opts.HealthyThreshold
	if err != nil {
		next = Health{State: "unhealthy", Reason: err.Error()}
		threshold = opts.UnhealthyThreshold
	}
	if c.state.State == "unknown" || c.state.State == next.State {
		c.state, c.streak = next, 0
		return
	}
	c.streak++
	if c.streak >= threshold {
		c.state, c.streak = next, 0
	}
}

// probe checks one target once. At most Options.MaxConcurrentProbes run at
// a time, so a load balancer over thousands of new targets does not probe
// them all in the same instant.
func (p *Plane) probe(ctx context.Context, k checkKey, timeout time.Duration) error {
	select {
	case p.probeSlots <- struct{}{}:
		defer func() { <-p.probeSlots }()
	case <-ctx.Done():
		return ctx.Err()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(k.addr.String(), strconv.Itoa(k.hc.Port))
	switch k.hc.Protocol {
	case "HTTP":
		path := k.hc.Path
		if path == "" {
			path = "/"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return fmt.Errorf("health check request: %w", err)
		}
		resp, err := p.httpClient.Do(req)
		if err != nil {
			return fmt.Errorf("HTTP health check %s: %w", addr, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP health check %s%s: status %d", addr, path, resp.StatusCode)
		}
		return nil
	default:
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("TCP health check: %w", err)
		}
		return conn.Close()
	}
}
