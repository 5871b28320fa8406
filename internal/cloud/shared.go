package cloud

import (
	"context"
	"errors"

	"golang.org/x/sync/singleflight"
)

// sharedAttempts bounds how often a caller re-runs a shared call that failed only
// because the caller who started it went away.
const sharedAttempts = 3

// shared runs fn once for all concurrent callers with the same key and priority
// (a call of one priority class never waits behind another class's queue). The
// caller that starts the call lends it its context; when that caller goes away and
// the call fails with its context error, the others still waiting start it again
// with theirs.
func shared[T any](ctx context.Context, group *singleflight.Group, key string, fn func(context.Context) (T, error)) (T, error) {
	key += "\x00" + PriorityFrom(ctx).String()
	var zero T
	for attempt := 1; ; attempt++ {
		ch := group.DoChan(key, func() (any, error) { return fn(ctx) })
		select {
		case r := <-ch:
			lenderGone := errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded)
			if r.Err != nil && lenderGone && ctx.Err() == nil && attempt < sharedAttempts {
				continue
			}
			if r.Err != nil {
				return zero, r.Err
			}
			return r.Val.(T), nil
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}
