// Package dataplane is minicloud's L4 load-balancer data plane: for every
// active load balancer it binds each listener on the VIP (TCP or UDP) and
// forwards connections and datagram sessions to the healthy targets,
// round-robin, enforcing the source ranges. Health checks probe every target
// on the configured interval.
//
// The plane holds no durable state: the server applies the desired state of
// every active load balancer at start-up and after every change.
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Backend is one target of a load balancer as the data plane sees it.
type Backend struct {
	// Addr is where traffic goes; invalid when the target cannot receive
	// traffic (see Down).
	Addr netip.Addr
	// Down, when not empty, says why the target gets no traffic without
	// probing it (for example "instance stopped").
	Down string
}

// HealthCheck is a resolved health check: Port and Interval are set. An
// empty Protocol means targets are not probed and count as healthy.
type HealthCheck struct {
	Protocol string // "TCP" or "HTTP"
	Port     int
	Path     string
	Interval time.Duration
	// Timeout bounds one probe; 0 means the interval or 2s, whichever is
	// shorter.
	Timeout time.Duration
	// UnhealthyThreshold overrides Options.UnhealthyThreshold when not 0.
	UnhealthyThreshold int
}

// Listener is one front-end port.
type Listener struct {
	Protocol   string // "TCP" or "UDP"
	Port       int
	TargetPort int
	// Backends, when not empty, are the indexes in Spec.Backends of this
	// listener's backends; empty: all of them.
	Backends []int
	// SourceRanges, when not empty, replace Spec.SourceRanges for this
	// listener.
	SourceRanges []netip.Prefix
}

// Spec is the desired data plane of one load balancer.
type Spec struct {
	VIP          netip.Addr
	Listeners    []Listener
	Backends     []Backend
	HealthCheck  HealthCheck
	SourceRanges []netip.Prefix // empty admits every source
	// SourceIPHash picks a client's backend from its address, so that its
	// connections all reach the same backend; otherwise round robin.
	SourceIPHash bool
	// IdleTimeout, when not 0, closes a TCP connection without traffic for
	// that long and replaces Options.UDPIdleTimeout for UDP sessions.
	IdleTimeout time.Duration
	// ProxyProtocol sends a PROXY protocol v2 header with the client's
	// address first on every TCP connection to a backend.
	ProxyProtocol bool
}

// Health is the observed health of one backend.
type Health struct {
	State  string // "unknown", "healthy" or "unhealthy"
	Reason string
}

// Options tune a Plane.
type Options struct {
	// UnhealthyThreshold and HealthyThreshold are the consecutive probe
	// results needed to change a target's state (default 2 each); the first
	// probe sets the state directly.
	UnhealthyThreshold, HealthyThreshold int
	// UDPIdleTimeout ends a UDP session without traffic (default 30s).
	UDPIdleTimeout time.Duration
	// DialTimeout bounds connecting to a backend (default 2s).
	DialTimeout time.Duration
	// RebindInterval is how often listeners that could not be bound (the
	// port was taken) are tried again (default 2s).
	RebindInterval time.Duration
	// MaxConcurrentProbes bounds health probes in flight (default 64).
	MaxConcurrentProbes int
}

// Plane runs the listeners and health checks of all load balancers.
type Plane struct {
	ctx    context.Context
	cancel context.CancelFunc
	log    logr.Logger
	opts   Options

	mu         sync.Mutex
	lbs        map[string]*balancer
	probeSlots chan struct{}
	httpClient *http.Client

	// checkers are shared by every load balancer that probes the same
	// target the same way: with thousands of nodes behind hundreds of load
	// balancers, one probe per node instead of one per node and LB.
	checkers map[checkKey]*sharedChecker
}

type sharedChecker struct {
	c    *checker
	refs int
}

// New returns a Plane whose goroutines stop when ctx is done or Close is
// called.
func New(ctx context.Context, log logr.Logger, opts Options) *Plane {
	if opts.UnhealthyThreshold <= 0 {
		opts.UnhealthyThreshold = 2
	}
	if opts.HealthyThreshold <= 0 {
		opts.HealthyThreshold = 2
	}
	if opts.UDPIdleTimeout <= 0 {
		opts.UDPIdleTimeout = 30 * time.Second
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.RebindInterval <= 0 {
		opts.RebindInterval = 2 * time.Second
	}
	if opts.MaxConcurrentProbes <= 0 {
		opts.MaxConcurrentProbes = 64
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Plane{
		ctx: ctx, cancel: cancel, log: log, opts: opts,
		lbs: map[string]*balancer{}, checkers: map[checkKey]*sharedChecker{},
		probeSlots: make(chan struct{}, opts.MaxConcurrentProbes),
		httpClient: &http.Client{
			// A fresh connection per probe, as a load balancer's checker
			// does; redirects are answers, not followed.
			Transport:     &http.Transport{DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	go p.rebindLoop()
	return p
}

// rebindLoop retries listeners that could not be bound, until the plane
// stops.
func (p *Plane) rebindLoop() {
	t := time.NewTicker(p.opts.RebindInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		for _, b := range p.lbs {
			if len(b.missing) > 0 && p.bindMissing(b) == nil {
				p.log.Info("listeners bound after retry", "loadBalancer", b.id)
			}
		}
		p.mu.Unlock()
	}
}

// balancer is the running data plane of one load balancer.
type balancer struct {
	id        string
	vip       netip.Addr
	table     atomic.Pointer[table]
	listeners map[listenerKey]closer
	missing   map[listenerKey]bool // wanted but not bound yet
	checkers  map[checkKey]bool    // references held in Plane.checkers
}

type listenerKey struct {
	protocol string
	port     int
}

type closer interface{ Close() }

// table is what a listener consults for every new connection; it is
// replaced as a whole on every Apply so connections see a consistent view.
type table struct {
	backends    []route
	ranges      []netip.Prefix
	targetPorts map[listenerKey]int
	// only and listenerRanges are the listeners' own backends (indexes in
	// backends) and source ranges, when they have them.
	only           map[listenerKey][]int
	listenerRanges map[listenerKey][]netip.Prefix
	next           atomic.Uint64
	sourceIPHash   bool
	idleTimeout    time.Duration
	proxy          bool
}

type route struct {
	addr    netip.Addr
	down    string   // not empty: no traffic, and why
	checker *checker // nil when down or when there is no health check
}

// Apply makes the data plane of load balancer id match spec. Listeners that
// stay keep their sockets and connections; removed ones are closed. It
// returns the errors of listeners that could not be bound; the others run.
func (p *Plane) Apply(id string, spec Spec) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.lbs[id]
	if b != nil && b.vip != spec.VIP {
		p.closeBalancer(b)
		b = nil
	}
	if b == nil {
		b = &balancer{id: id, vip: spec.VIP, listeners: map[listenerKey]closer{}, missing: map[listenerKey]bool{}, checkers: map[checkKey]bool{}}
		p.lbs[id] = b
	}

	// Health checkers: acquire the new ones before releasing the old, so
	// unchanged targets keep their checker and its verdict.
	checkers := map[checkKey]bool{}
	t := &table{ranges: spec.SourceRanges, targetPorts: map[listenerKey]int{},
		only: map[listenerKey][]int{}, listenerRanges: map[listenerKey][]netip.Prefix{},
		sourceIPHash: spec.SourceIPHash, idleTimeout: spec.IdleTimeout, proxy: spec.ProxyProtocol}
	for _, be := range spec.Backends {
		r := route{addr: be.Addr, down: be.Down}
		if r.down == "" && !be.Addr.IsValid() {
			r.down = "no address"
		}
		if r.down == "" && spec.HealthCheck.Protocol != "" {
			k := checkKey{addr: be.Addr, hc: spec.HealthCheck}
			if !checkers[k] {
				p.acquireChecker(k)
				checkers[k] = true
			}
			r.checker = p.checkers[k].c
		}
		t.backends = append(t.backends, r)
	}
	for k := range b.checkers {
		p.releaseChecker(k)
	}
	b.checkers = checkers

	want := map[listenerKey]bool{}
	for _, l := range spec.Listeners {
		k := listenerKey{protocol: l.Protocol, port: l.Port}
		want[k] = true
		t.targetPorts[k] = l.TargetPort
		if len(l.Backends) > 0 {
			t.only[k] = l.Backends
		}
		if len(l.SourceRanges) > 0 {
			t.listenerRanges[k] = l.SourceRanges
		}
	}
	b.table.Store(t)

	for k, l := range b.listeners {
		if !want[k] {
			l.Close()
			delete(b.listeners, k)
		}
	}
	clear(b.missing)
	for k := range want {
		if b.listeners[k] == nil {
			b.missing[k] = true
		}
	}
	return p.bindMissing(b)
}

// bindMissing binds the listeners of b that are not bound yet; those that
// fail stay missing for rebindLoop. p.mu is held.
func (p *Plane) bindMissing(b *balancer) error {
	var errs []error
	for k := range b.missing {
		l, err := p.listen(b, k)
		if err != nil {
			errs = append(errs, fmt.Errorf("load balancer %s: listen %s %s: %w", b.id, k.protocol, net.JoinHostPort(b.vip.String(), strconv.Itoa(k.port)), err))
			continue
		}
		b.listeners[k] = l
		delete(b.missing, k)
	}
	return errors.Join(errs...)
}

// Remove closes every listener, connection and health check of load
// balancer id. Removing an unknown id does nothing.
func (p *Plane) Remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.lbs[id]; b != nil {
		p.closeBalancer(b)
		delete(p.lbs, id)
	}
}

// Close removes every load balancer and stops the plane.
func (p *Plane) Close() {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, b := range p.lbs {
		p.closeBalancer(b)
		delete(p.lbs, id)
	}
}

// Health returns the health of the backends of load balancer id by
// address, or nil when id is not running.
func (p *Plane) Health(id string) map[netip.Addr]Health {
	p.mu.Lock()
	b := p.lbs[id]
	p.mu.Unlock()
	if b == nil {
		return nil
	}
	t := b.table.Load()
	out := make(map[netip.Addr]Health, len(t.backends))
	for _, r := range t.backends {
		if r.addr.IsValid() {
			out[r.addr] = r.health()
		}
	}
	return out
}

func (r route) health() Health {
	switch {
	case r.down != "":
		return Health{State: "unhealthy", Reason: r.down}
	case r.checker == nil:
		return Health{State: "healthy", Reason: "no health check"}
	}
	return r.checker.current()
}

// closeBalancer closes b's listeners and releases its checkers; p.mu is held.
func (p *Plane) closeBalancer(b *balancer) {
	for k, l := range b.listeners {
		l.Close()
		delete(b.listeners, k)
	}
	clear(b.missing)
	for k := range b.checkers {
		p.releaseChecker(k)
		delete(b.checkers, k)
	}
}

// acquireChecker takes a reference on the checker of k, starting it if
// needed; p.mu is held.
func (p *Plane) acquireChecker(k checkKey) {
	sc := p.checkers[k]
	if sc == nil {
		sc = &sharedChecker{c: p.startChecker(k)}
		p.checkers[k] = sc
	}
	sc.refs++
}

// releaseChecker drops a reference, stopping the checker with the last
// one; p.mu is held.
func (p *Plane) releaseChecker(k checkKey) {
	sc := p.checkers[k]
	if sc == nil {
		return
	}
	if sc.refs--; sc.refs <= 0 {
		sc.c.stop()
		delete(p.checkers, k)
	}
}

func (p *Plane) listen(b *balancer, k listenerKey) (closer, error) {
	addr := net.JoinHostPort(b.vip.String(), strconv.Itoa(k.port))
	log := p.log.WithValues("loadBalancer", b.id, "listener", k.protocol+"/"+addr)
	switch k.protocol {
	case "TCP":
		return p.listenTCP(b, k, addr, log)
	case "UDP":
		return p.listenUDP(b, k, addr, log)
	}
	return nil, fmt.Errorf("unsupported protocol %q", k.protocol)
}

// admits reports whether src may use listener k.
func (t *table) admits(k listenerKey, src netip.Addr) bool {
	ranges := t.ranges
	if lr, ok := t.listenerRanges[k]; ok {
		ranges = lr
	}
	if len(ranges) == 0 {
		return true
	}
	src = src.Unmap()
	for _, r := range ranges {
		if r.Contains(src) {
			return true
		}
	}
	return false
}

// pick returns the backends to try for a new connection from src on
// listener k: every eligible backend, starting at the next one in
// round-robin order, or with SourceIPHash at the one src's address hashes
// to. Targets of unknown health (not probed yet) are eligible, as are all
// targets that are not down when there is no health check.
func (t *table) pick(k listenerKey, src netip.Addr) []netip.AddrPort {
	port, ok := t.targetPorts[k]
	if !ok {
		return nil
	}
	var eligible []netip.AddrPort
	add := func(r route) {
		if r.down == "" && (r.checker == nil || r.checker.current().State != "unhealthy") {
			eligible = append(eligible, netip.AddrPortFrom(r.addr, uint16(port)))
		}
	}
	if only, ok := t.only[k]; ok {
		for _, i := range only {
			if i >= 0 && i < len(t.backends) {
				add(t.backends[i])
			}
		}
	} else {
		for _, r := range t.backends {
			add(r)
		}
	}
	if len(eligible) == 0 {
		return nil
	}
	var start int
	if t.sourceIPHash {
		h := fnv.New32a()
		h.Write(src.Unmap().AsSlice())
		start = int(h.Sum32() % uint32(len(eligible)))
	} else {
		start = int(t.next.Add(1)-1) % len(eligible)
	}
	return append(eligible[start:], eligible[:start]...)
}
