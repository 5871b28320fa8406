package service

// Node event handling: which node changes (and adoptions at start-up) start a
// backend pass, and the burst of changes a pass waits on to pause.

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// nodesKey is the single work item of the node syncer: all node changes of one
// window collapse into it.
var nodesKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "backend-nodes"}}

// nodeEvents enqueues nodesKey a window after the first relevant node change;
// the queue keeps the earliest time, and the pass waits until the changes
// have paused for a window (burst), so that a burst of joining nodes shares
// one pass.
func nodeEvents(window time.Duration, clk clock.PassiveClock, burst *nodeBurst, listed func(*v1.Node) string) handler.TypedEventHandler[*v1.Node, reconcile.Request] {
	add := passTrigger(window, clk, burst)
	return handler.TypedFuncs[*v1.Node, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if backendChanged(e.ObjectOld, e.ObjectNew, listed) {
				add(q)
			}
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*v1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
}

// passTrigger returns what enqueues nodesKey a window after a change, as part
// of the current burst of changes.
func passTrigger(window time.Duration, clk clock.PassiveClock, burst *nodeBurst) func(workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	return func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		burst.touch(clk.Now())
		q.AddAfter(nodesKey, window)
	}
}

// adoptionEvents enqueues nodesKey for the load balancers adopted at
// start-up (Controller.verifyBackends), like a node change: the adoptions of
// a start-up share one pass.
func adoptionEvents(window time.Duration, clk clock.PassiveClock, burst *nodeBurst) handler.EventHandler {
	add := passTrigger(window, clk, burst)
	return handler.Funcs{
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
}

// burstHoldWindows bounds how many windows a pass waits for a burst of node
// changes to pause: a steady stream of changes still gets a pass this often.
const burstHoldWindows = 10

// nodeBurst tracks the node changes not yet handled by a pass: when the
// first and the last came, and how many relevant changes there were in all
// (seq), so that a running pass sees whether its backend set is stale.
type nodeBurst struct {
	mu          sync.Mutex
	first, last time.Time
	seq         uint64
}

func (b *nodeBurst) touch(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first.IsZero() {
		b.first = now
	}
	b.last = now
	b.seq++
}

// changes returns the number of relevant node changes so far.
func (b *nodeBurst) changes() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// hold returns how long a pass due at now should wait for the changes to
// pause for window (0: run it now, and the changes so far are its own).
func (b *nodeBurst) hold(now time.Time, window time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if quiet := b.last.Add(window).Sub(now); quiet > 0 && now.Sub(b.first) < burstHoldWindows*window {
		return quiet
	}
	b.first, b.last = time.Time{}, time.Time{}
	return 0
}
