package cloud

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// starvationLimit bounds how long a lower priority class waits under contention:
// once a waiter is at the head of its class's queue, at most this many grants go
// to other classes before it is served.
const starvationLimit = 16

// budget is one provider's request budget: a token bucket shared by every caller,
// a cap on calls in flight, and a pause that throttling responses extend. Callers
// queue by priority class; the next grant goes to the head of the highest class,
// unless a lower class's head has been passed over starvationLimit times.
//
// There is no dispatcher goroutine: the caller first in line re-evaluates under the
// lock when it is signalled (a grant, a release, a pause, a new or abandoned waiter
// may change who is first or whether it may go) or when its own timer for the next
// token fires. Only that caller is woken, so thousands of queued calls cost nothing
// per grant.
type budget struct {
	clock         clock.Clock
	limiter       *rate.Limiter // nil: no rate limit
	maxConcurrent int           // 0: no cap

	mu          sync.Mutex
	queues      [numPriorities][]*waiter
	inFlight    int
	grants      uint64
	pausedUntil time.Time
}

type waiter struct {
	// headSince is the grant count when the waiter became the head of its queue.
	headSince uint64
	// wake is signalled when the waiter may have become first in line or able to go.
	wake chan struct{}
}

// newBudget returns a budget of ratePerSecond (<= 0: unlimited) with burst, and at
// most maxConcurrent calls in flight (<= 0: no cap).
func newBudget(clk clock.Clock, ratePerSecond float64, burst, maxConcurrent int) *budget {
	b := &budget{clock: clk, maxConcurrent: maxConcurrent}
	if ratePerSecond > 0 {
		if burst < 1 {
			burst = 1
		}
		b.limiter = rate.NewLimiter(rate.Limit(ratePerSecond), burst)
	}
	return b
}

// acquire waits until a call at priority prio may start, then returns the function
// that ends it. It fails only when ctx ends first.
func (b *budget) acquire(ctx context.Context, prio Priority) (release func(), err error) {
	if prio < 0 || int(prio) >= numPriorities {
		prio = PriorityRefresh
	}
	b.mu.Lock()
	w := &waiter{wake: make(chan struct{}, 1)}
	if len(b.queues[prio]) == 0 {
		w.headSince = b.grants
	}
	b.queues[prio] = append(b.queues[prio], w)
	for {
		var wait time.Duration
		var until time.Time
		if b.nextLocked() == w {
			now := b.clock.Now()
			wait = b.delayLocked(now)
			until = now.Add(wait)
			if wait == 0 && (b.maxConcurrent <= 0 || b.inFlight < b.maxConcurrent) {
				if b.limiter != nil {
					b.limiter.AllowN(now, 1)
				}
				b.inFlight++
				b.grants++
				b.removeLocked(prio, w)
				b.signalNextLocked()
				b.mu.Unlock()
				return b.releaseFunc(), nil
			}
		}
		b.mu.Unlock()
		if err := b.waitFor(ctx, w.wake, wait, until); err != nil {
			b.mu.Lock()
			b.removeLocked(prio, w)
			b.signalNextLocked()
			b.mu.Unlock()
			return nil, err
		}
		b.mu.Lock()
	}
}

// waitFor blocks until wake is signalled, the clock reaches until (when d > 0),
// or ctx ends.
func (b *budget) waitFor(ctx context.Context, wake <-chan struct{}, d time.Duration, until time.Time) error {
	var timeout <-chan time.Time
	if d > 0 {
		t := b.clock.NewTimer(d)
		defer t.Stop()
		// The clock may have moved since d was computed; never wait past until.
		if !b.clock.Now().Before(until) {
			return nil
		}
		timeout = t.C()
	}
	select {
	case <-wake:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (b *budget) releaseFunc() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.inFlight--
			b.signalNextLocked()
			b.mu.Unlock()
		})
	}
}

// charge spends n more tokens (n <= 0: nothing) for requests a call made
// beyond the one its grant paid for. The bucket may go into debt: the next
// grants wait until it is paid off.
func (b *budget) charge(n int) {
	if n <= 0 || b.limiter == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for n > 0 {
		k := min(n, b.limiter.Burst())
		b.limiter.ReserveN(now, k)
		n -= k
	}
	b.signalNextLocked()
}

// pause holds every grant back until d from now (throttling). A shorter pause
// never shortens a longer one already in force.
func (b *budget) pause(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until := b.clock.Now().Add(d); until.After(b.pausedUntil) {
		b.pausedUntil = until
		b.signalNextLocked()
	}
}

// nextLocked returns the waiter the next grant goes to: the head of the highest
// priority queue, unless a head has been passed over starvationLimit times, in
// which case the highest such overdue head.
func (b *budget) nextLocked() *waiter {
	var best *waiter
	for p := range b.queues {
		q := b.queues[p]
		if len(q) == 0 {
			continue
		}
		if b.grants-q[0].headSince >= starvationLimit {
			return q[0]
		}
		if best == nil {
			best = q[0]
		}
	}
	return best
}

// delayLocked is how long the next grant must wait for a pause to end or a token.
func (b *budget) delayLocked(now time.Time) time.Duration {
	var d time.Duration
	if now.Before(b.pausedUntil) {
		d = b.pausedUntil.Sub(now)
	}
	if b.limiter != nil {
		if missing := 1 - b.limiter.TokensAt(now); missing > 0 {
			// Round up to a millisecond so that float error cannot make a waiter
			// spin on sub-nanosecond timers.
			td := time.Duration(math.Ceil(missing / float64(b.limiter.Limit()) * float64(time.Second/time.Millisecond)))
			td *= time.Millisecond
			d = max(d, td)
		}
	}
	return d
}

func (b *budget) removeLocked(prio Priority, w *waiter) {
	q := b.queues[prio]
	for i, x := range q {
		if x != w {
			continue
		}
		b.queues[prio] = append(q[:i:i], q[i+1:]...)
		if i == 0 && len(b.queues[prio]) > 0 {
			b.queues[prio][0].headSince = b.grants
		}
		return
	}
}

// signalNextLocked wakes the caller now first in line, so it re-evaluates.
func (b *budget) signalNextLocked() {
	if w := b.nextLocked(); w != nil {
		select {
		case w.wake <- struct{}{}:
		default: // already signalled
		}
	}
}

// available returns the tokens the bucket holds now (+Inf without a rate limit).
func (b *budget) available() float64 {
	if b.limiter == nil {
		return math.Inf(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.limiter.TokensAt(b.clock.Now()), 0)
}

// queued returns the number of waiting callers per priority class.
func (b *budget) queued() [numPriorities]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n [numPriorities]int
	for p, q := range b.queues {
		n[p] = len(q)
	}
	return n
}

// waiting returns the number of waiting callers.
func (b *budget) waiting() int {
	n := 0
	for _, q := range b.queued() {
		n += q
	}
	return n
}
