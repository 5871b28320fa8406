package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// faultDriver applies one fault kind per step, in seeded shuffled rounds
// of all kinds, until its context ends.
type faultDriver struct {
	t     *testing.T
	cloud *cloudProcess
	cl    *client.Client
	front *cloudFront
	step  time.Duration
	rng   *rand.Rand

	mu        sync.Mutex
	steps     map[string]int
	errors    int64 // 500s minicloud answered, over all its incarnations
	throttled int64
	requests  int64
}

func (f *faultDriver) run(ctx context.Context) {
	f.steps = map[string]int{}
	var round []string
	tick := time.NewTicker(f.step)
	defer tick.Stop()
	for {
		if len(round) == 0 {
			round = append([]string(nil), faultKinds...)
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
		faults = api.Faults{ErrorRate: 1, Operations: []string{"GET /v1/instances"}}
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
	f.mu.Unlock()
}

// stop ends every fault: the cloud is up, answers fully and fails nothing.
func (f *faultDriver) stop(ctx context.Context) {
	f.front.setEmpty(false)
	if err := faultsOff(ctx, f.cl); err != nil {
		f.t.Fatalf("clear faults: %v", err)
	}
}

type faultStats struct {
	steps                       map[string]int
	errors, throttled, requests int64
	emptied                     int
}

func (f *faultDriver) stats() faultStats {
	f.collectStats(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	return faultStats{steps: f.steps, errors: f.errors, throttled: f.throttled, requests: f.requests, emptied: f.front.emptied()}
}

// leaderKiller kills the leader with SIGKILL every `every`, and once, at
// partitionAt, cuts the leader off the API server for partitionFor.
type leaderKiller struct {
	t            *testing.T
	replicas     []*replica
	every        time.Duration
	partitionAt  time.Duration
	partitionFor time.Duration

	mu          sync.Mutex
	partitioned bool
	kills       int
	failovers   []time.Duration // kill to the next leader's acquisition
	noLeader    int             // ticks on which no replica led
	part        partitionRecord
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

func (l *leaderKiller) leader() (*replica, *managertest.Process) {
	for _, r := range l.replicas {
		if p, ok := r.leading(); ok {
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
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-part.C:
			wg.Add(1)
			go func() { defer wg.Done(); l.partition(ctx) }()
		case <-tick.C:
			l.mu.Lock()
			skip := l.partitioned
			l.mu.Unlock()
			if skip {
				continue
			}
			r, p := l.leader()
			if r == nil {
				l.mu.Lock()
				l.noLeader++
				l.mu.Unlock()
				continue
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
	}
}

// waitNewLeader waits up to limit for a leader other than old.
func (l *leaderKiller) waitNewLeader(ctx context.Context, old *managertest.Process, since time.Time, limit time.Duration) (time.Duration, bool) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if _, p := l.leader(); p != nil && p != old {
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

func (l *leaderKiller) partition(ctx context.Context) {
	// The partition needs a leader: wait for one (a kill may just have
	// happened).
	var r *replica
	var p *managertest.Process
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for r == nil {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r, p = l.leader()
		}
	}
	l.mu.Lock()
	l.partitioned = true
	l.mu.Unlock()
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
		if _, np := l.leader(); np != nil && np != p && rec.newLeader == 0 {
			rec.newLeader = time.Since(cut)
		}
		if rec.newLeader > 0 && oldAlive {
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
	l.partitioned = false
	l.part = rec
	l.mu.Unlock()
}

type leaderStats struct {
	kills, noLeader, exits int
	failovers              []time.Duration
	part                   partitionRecord
}

func (l *leaderKiller) stats(replicas []*replica) leaderStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := leaderStats{kills: l.kills, noLeader: l.noLeader, failovers: append([]time.Duration(nil), l.failovers...), part: l.part}
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
