package cloud

import "context"

// Priority orders cloud calls competing for a provider's request budget. Lower
// values go first.
type Priority int

// The priority classes, highest first.
const (
	// PriorityNodeInit: initializing a node that joined (it cannot take pods yet).
	PriorityNodeInit Priority = iota
	// PriorityLifecycle: existence and shutdown checks of NotReady nodes.
	PriorityLifecycle
	// PriorityLBWrite: creating, re-ensuring and deleting load balancers.
	PriorityLBWrite
	// PriorityLBUpdate: updating the backends of existing load balancers.
	PriorityLBUpdate
	// PriorityRoutes: listing, creating and deleting routes.
	PriorityRoutes
	// PriorityRefresh: periodic refreshes and drift checks.
	PriorityRefresh

	numPriorities = int(PriorityRefresh) + 1
)

var priorityNames = [numPriorities]string{"node-init", "lifecycle", "lb-write", "lb-update", "routes", "refresh"}

// String returns the metric label of the priority.
func (p Priority) String() string {
	if p < 0 || int(p) >= numPriorities {
		return "unknown"
	}
	return priorityNames[p]
}

type priorityKey struct{}

// WithPriority returns a context whose cloud calls run at priority p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority set by WithPriority, or PriorityRefresh.
func PriorityFrom(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	return PriorityRefresh
}
