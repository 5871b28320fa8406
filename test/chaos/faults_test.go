package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// Cloud fault kinds, one per step of the fault schedule.
const (
	faultErrors      = "30% of cloud calls fail (500)"
	faultThrottle    = "429 burst with Retry-After (80% of calls)"
	faultLatency     = "latency 400 ms (and 5% errors)"
	faultListFail    = "instance listings fail (100%)"
	faultListEmpty   = "instance listings come back empty"
	faultCloudKilled = "minicloud kill -9, restart on its state"
)

var faultKinds = []string{faultErrors, faultThrottle, faultLatency, faultListFail, faultListEmpty, faultCloudKilled}

// faultKinds are minicloud's fault kinds and then the provider's.
func (p *provider) faultKinds() []string {
	kinds := slices.Clone(faultKinds)
	if p.cloudFaults != nil {
		kinds = slices.Clone(p.cloudFaults)
	}
	for _, f := range p.faults {
		kinds = append(kinds, f.kind)
	}
	return kinds
}

// faultDriver applies one fault kind per step, in seeded shuffled rounds
// of all kinds, until its context ends.
type faultDriver struct {
	t     *testing.T
	cloud *cloudProcess
	cl    *client.Client
	front *cloudFront
	step  time.Duration
	rng   *rand.Rand
	kinds []string        // what run shuffles: faultKinds and the provider's
	extra []providerFault // the provider's kinds
	// listOp is the operation minicloud faults the provider's instance
	// listings under.
	listOp string
	// reset ends the provider's faults of the step before (nil: none).
	reset func()

	mu        sync.Mutex
	steps     map[string]int
	errors    int64 // 500s minicloud answered, over all its incarnations
	throttled int64
	requests  int64
	unauth    int64 // 401s (Keystone rejecting tokens)
}

func (f *faultDriver) run(ctx context.Context) {
	f.steps = map[string]int{}
	var round []string
	tick := time.NewTicker(f.step)
	defer tick.Stop()
	for {
		if len(round) == 0 {
			round = slices.Clone(f.kinds)
			f.rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		kind := round[0]
		round = round[1:]
		before := f.front.emptied()
		f.apply(ctx, kind)
		f.mu.Lock()
		f.steps[kind]++
		f.mu.Unlock()
		// An empty-listing step lasts until a manager has been served an
		// empty listing (up to three steps): a step in which none listed
		// (the leader just killed, say) tested nothing.
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if kind != faultListEmpty || f.front.emptied() > before || i == 2 {
				break
			}
		}
	}
}

func (f *faultDriver) apply(ctx context.Context, kind string) {
	if f.reset != nil {
		f.reset()
	}
	f.front.setEmpty(kind == faultListEmpty)
	var faults api.Faults
	switch kind {
	case faultErrors:
		faults = api.Faults{ErrorRate: 0.3}
	case faultThrottle:
		faults = api.Faults{ThrottleRate: 0.8}
	case faultLatency:
		faults = api.Faults{LatencyMS: 400, ErrorRate: 0.05}
	case faultListFail:
		faults = api.Faults{ErrorRate: 1, Operations: []string{f.listOp}}
	case faultCloudKilled:
		f.collectStats(ctx)
		f.cloud.kill()
		// Down for half a step, then up again on the same state.
		select {
		case <-ctx.Done():
		case <-time.After(f.step / 2):
		}
		f.cloud.start()
		if err := f.cloud.waitUp(context.Background(), f.cl); err != nil {
			f.t.Errorf("minicloud did not come back after kill -9: %v", err)
		}
		return
	default:
		for _, pf := range f.extra {
			if pf.kind == kind {
				faults = pf.apply(ctx, f)
			}
		}
	}
	if _, err := f.cl.SetFaults(ctx, faults); err != nil && ctx.Err() == nil {
		f.t.Errorf("set faults %q: %v", kind, err)
	}
}

// collectStats adds minicloud's counts (kept in memory, lost on a kill) to
// the driver's totals.
func (f *faultDriver) collectStats(ctx context.Context) {
	st, err := f.cl.Stats(ctx)
	if err != nil {
		f.t.Logf("minicloud stats: %v", err)
		return
	}
	f.mu.Lock()
	f.errors += st.Errors
	f.throttled += st.Throttled
	f.requests += st.Total
	f.unauth += st.Unauthorized
	f.mu.Unlock()
}

// stop ends every fault: the cloud is up, answers fully and fails nothing.
func (f *faultDriver) stop(ctx context.Context) {
	if err := f.clear(ctx); err != nil {
		f.t.Fatal(err)
	}
}

// clear turns every fault off: the provider's, the cloud front's and
// minicloud's.
func (f *faultDriver) clear(ctx context.Context) error {
	if f.reset != nil {
		f.reset()
	}
	f.front.setEmpty(false)
	if err := faultsOff(ctx, f.cl); err != nil {
		return fmt.Errorf("clear faults: %w", err)
	}
	return nil
}

type faultStats struct {
	kinds                       []string
	steps                       map[string]int
	errors, throttled, requests int64
	unauthorized                int64
	emptied                     int
}

func (f *faultDriver) stats() faultStats {
	f.collectStats(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	return faultStats{kinds: f.kinds, steps: f.steps, errors: f.errors, throttled: f.throttled, requests: f.requests, unauthorized: f.unauth, emptied: f.front.emptied()}
}

// leaderKiller kills the leader with SIGKILL every `every`; once, at
// partitionAt, cuts the leader off the API server for partitionFor; and
// once, at pauseAt, freezes the leader with SIGSTOP until another replica
// has acquired the lease, then lets it go on (SIGCONT).
type leaderKiller struct {
	t            *testing.T
	replicas     []*replica
	front        *cloudFront
	every        time.Duration
	partitionAt  time.Duration
	partitionFor time.Duration
	pauseAt      time.Duration

	mu          sync.Mutex
	partitioned bool // partitioned or paused: no kills meanwhile
	kills       int
	failovers   []time.Duration // kill to the next leader's acquisition
	noLeader    int             // ticks on which no replica led
	part        partitionRecord
	pause       pauseRecord
}

// pauseMax bounds the pause: a successor acquires the lease after about
// its duration (6s) and a retry period, or something else is wrong.
const pauseMax = time.Minute

// pauseRecord is what happened around the leader's pause.
type pauseRecord struct {
	done bool
	// newLeader: after SIGSTOP, when another replica acquired the lease
	// (0: none within pauseMax).
	newLeader time.Duration
	// noticed and exited: after SIGCONT, when the old leader logged that its
	// renew failed and when its process exited (0: not within pauseMax).
	noticed, exited time.Duration
	// overlap: from SIGCONT until the old leader stopped leading (its
	// renew failed or it exited, whichever came first), while the successor
	// led: both believed they led.
	overlap time.Duration
	// writes: the cloud writes the old leader sent from SIGCONT to its exit.
	writes []cloudWrite
}

// partitionRecord is what happened during the partition.
type partitionRecord struct {
	done bool
	// oldExited and newLeader: after the cut, when the partitioned leader's
	// process exited and when another replica acquired the lease (0: not
	// within the partition).
	oldExited, newLeader time.Duration
	// overlap: both processes believed they led at once.
	overlap time.Duration
}

func (l *leaderKiller) leader() (*replica, *managertest.Process) { return l.leaderOtherThan(nil) }

// leaderOtherThan is a leading replica whose running process is not old
// (old may still believe it leads: a partitioned or paused leader).
func (l *leaderKiller) leaderOtherThan(old *managertest.Process) (*replica, *managertest.Process) {
	for _, r := range l.replicas {
		if p, ok := r.leading(); ok && p != old {
			return r, p
		}
	}
	return nil, nil
}

func (l *leaderKiller) run(ctx context.Context) {
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	part := time.NewTimer(l.partitionAt)
	defer part.Stop()
	pause := time.NewTimer(l.pauseAt)
	defer pause.Stop()
	// A kill due while the leader is partitioned or paused is made as soon
	// as that ends, so that they do not cost the run its kills.
	var retry <-chan time.Time
	var wg sync.WaitGroup
	defer wg.Wait()
	kill := func() {
		l.mu.Lock()
		busy := l.partitioned
		l.mu.Unlock()
		retry = nil
		if busy {
			retry = time.After(500 * time.Millisecond)
			return
		}
		r, p := l.leader()
		if r == nil {
			l.mu.Lock()
			l.noLeader++
			l.mu.Unlock()
			return
		}
		killed := time.Now()
		_ = p.Signal(syscall.SIGKILL)
		l.mu.Lock()
		l.kills++
		l.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, ok := l.waitNewLeader(ctx, p, killed, l.every); ok {
				l.mu.Lock()
				l.failovers = append(l.failovers, d)
				l.mu.Unlock()
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-part.C:
			wg.Add(1)
			go func() { defer wg.Done(); l.partition(ctx) }()
		case <-pause.C:
			wg.Add(1)
			go func() { defer wg.Done(); l.pauseLeader(ctx) }()
		case <-tick.C:
			kill()
		case <-retry:
			kill()
		}
	}
}

// waitNewLeader waits up to limit for a leader other than old.
func (l *leaderKiller) waitNewLeader(ctx context.Context, old *managertest.Process, since time.Time, limit time.Duration) (time.Duration, bool) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if _, p := l.leaderOtherThan(old); p != nil {
			return time.Since(since), true
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-deadline.C:
			return 0, false
		case <-tick.C:
		}
	}
}

// takeLeader waits for a leader (a kill may just have happened) and stops
// the kills until the returned function is called.
func (l *leaderKiller) takeLeader(ctx context.Context) (*replica, *managertest.Process, func()) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		if !l.partitioned {
			if r, p := l.leader(); r != nil {
				l.partitioned = true
				l.mu.Unlock()
				return r, p, func() {
					l.mu.Lock()
					l.partitioned = false
					l.mu.Unlock()
				}
			}
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, nil, nil
		case <-tick.C:
		}
	}
}

// pauseLeader freezes the leader (SIGSTOP, as a long GC pause or a frozen
// VM would) until another replica has acquired the lease, then lets it go
// on and measures how long both believed they led, and what the old one
// wrote to the cloud meanwhile.
func (l *leaderKiller) pauseLeader(ctx context.Context) {
	r, p, release := l.takeLeader(ctx)
	if r == nil {
		return
	}
	defer release()
	var rec pauseRecord
	paused := time.Now()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		l.t.Logf("chaos: pause replica %d: %v", r.id, err)
		return
	}
	l.t.Logf("chaos: paused replica %d (the leader) with SIGSTOP", r.id)
	// Resume even if the window ends first: a stopped process never exits.
	d, ok := l.waitNewLeader(ctx, p, paused, pauseMax)
	if ok {
		rec.newLeader = d
	}
	from := len(p.Output())
	resumed := time.Now()
	_ = p.Signal(syscall.SIGCONT)
	l.t.Logf("chaos: resumed replica %d after %s (successor after %s)", r.id, time.Since(paused).Round(100*time.Millisecond), orNone(rec.newLeader))
	if !ok {
		return
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(pauseMax)
	defer deadline.Stop()
	var exitedAt time.Time
	for exitedAt.IsZero() {
		if rec.noticed == 0 && renewFailed(p, from) {
			rec.noticed = time.Since(resumed)
		}
		if !r.running(p) {
			exitedAt = time.Now()
			rec.exited = exitedAt.Sub(resumed)
			break
		}
		select {
		case <-deadline.C:
			l.t.Logf("chaos: replica %d still running %s after it resumed", r.id, pauseMax)
			exitedAt = time.Now()
		case <-tick.C:
		}
	}
	rec.overlap = exitedAt.Sub(resumed)
	if rec.noticed > 0 {
		rec.overlap = rec.noticed
	}
	rec.writes = l.front.writesBetween(r.id, resumed, exitedAt)
	rec.done = true
	l.mu.Lock()
	l.pause = rec
	l.mu.Unlock()
}

func (l *leaderKiller) partition(ctx context.Context) {
	r, p, release := l.takeLeader(ctx)
	if r == nil {
		return
	}
	defer release()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	cut := time.Now()
	r.proxy.Cut()
	l.t.Logf("chaos: partitioned replica %d (the leader) from the API server", r.id)
	var rec partitionRecord
	end := time.NewTimer(l.partitionFor)
	defer end.Stop()
	var overlapFrom time.Time
loop:
	for {
		oldAlive := r.running(p)
		if !oldAlive && rec.oldExited == 0 {
			rec.oldExited = time.Since(cut)
		}
		if _, np := l.leaderOtherThan(p); np != nil && rec.newLeader == 0 {
			rec.newLeader = time.Since(cut)
		}
		// The old leader believes it leads until its renew fails (it then
		// exits).
		if rec.newLeader > 0 && oldAlive && !renewFailed(p, 0) {
			if overlapFrom.IsZero() {
				overlapFrom = time.Now()
			}
			rec.overlap = time.Since(overlapFrom)
		}
		select {
		case <-ctx.Done():
			break loop
		case <-end.C:
			break loop
		case <-tick.C:
		}
	}
	r.proxy.Heal()
	rec.done = true
	l.mu.Lock()
	l.part = rec
	l.mu.Unlock()
}

type leaderStats struct {
	kills, noLeader, exits int
	failovers              []time.Duration
	part                   partitionRecord
	pause                  pauseRecord
}

func (l *leaderKiller) stats(replicas []*replica) leaderStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := leaderStats{kills: l.kills, noLeader: l.noLeader, failovers: append([]time.Duration(nil), l.failovers...), part: l.part, pause: l.pause}
	for _, r := range replicas {
		r.mu.Lock()
		s.exits += r.exits
		r.mu.Unlock()
	}
	return s
}

func (s leaderStats) failoverSummary() string {
	if len(s.failovers) == 0 {
		return "-"
	}
	var sum, max time.Duration
	for _, d := range s.failovers {
		sum += d
		max = maxDur(max, d)
	}
	return fmt.Sprintf("mean %s, max %s (%d of %d kills followed by a new leader within the kill period)",
		(sum / time.Duration(len(s.failovers))).Round(100*time.Millisecond), max.Round(100*time.Millisecond), len(s.failovers), s.kills)
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
