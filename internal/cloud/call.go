package cloud

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// Pauses after throttling: the default when the cloud did not say how long to
// wait, and a cap, so that a bogus Retry-After cannot stop a provider for hours.
const (
	defaultThrottlePause = time.Second
	maxThrottlePause     = 5 * time.Minute
)

// call runs one cloud call through p's layer: it waits for the request budget at the
// context's priority, makes the call, records metrics, and retries throttled
// (after the pause the cloud asked for, applied to the whole provider) and
// transient errors (with jittered exponential backoff) up to p's retry limit.
// Every other error, cloudproviderapi.RetryError included, is returned unchanged, at once.
func call[T any](ctx context.Context, p *Provider, method string, fn func(context.Context) (T, error)) (T, error) {
	prio := PriorityFrom(ctx)
	var last error // the previous attempt's error, when retrying
	for attempt := 0; ; attempt++ {
		queued := p.clock.Now()
		release, err := p.budget.acquire(ctx, prio)
		if err != nil {
			requestsTotal.WithLabelValues(p.name, method, OutcomeCanceled).Inc()
			var zero T
			err = fmt.Errorf("provider %s: %s: waiting for the request budget: %w", p.name, method, err)
			if last != nil {
				err = fmt.Errorf("%w (retry abandoned: %w)", last, err)
			}
			return zero, err
		}
		start := p.clock.Now()
		budgetWait.WithLabelValues(p.name, prio.String()).Observe(start.Sub(queued).Seconds())
		// The grant paid for one request; a provider that counts its
		// requests (stratus.CountRequest) pays for the others after the call.
		var requests atomic.Int64
		v, err := fn(stratus.WithRequestCounter(ctx, func() { requests.Add(1) }))
		p.budget.charge(int(requests.Load()) - 1)
		release()
		requestDuration.WithLabelValues(p.name, method).Observe(p.clock.Since(start).Seconds())
		requestsTotal.WithLabelValues(p.name, method, outcome(err)).Inc()
		if logger := log.FromContext(ctx).V(3); logger.Enabled() {
			// Every call, with its caller's log values (a controller's
			// object): --v=3 says what the budget was spent on.
			logger.Info("Cloud call", "provider", p.name, "method", method, "priority", prio.String(),
				"queued", start.Sub(queued), "took", p.clock.Since(start), "requests", max(1, requests.Load()), "error", errText(err))
		}
		if err == nil {
			p.observeOutcome(nil)
			return v, nil
		}

		var throttled *stratus.ThrottledError
		var backoff time.Duration
		switch {
		case errors.As(err, &throttled):
			throttledTotal.WithLabelValues(p.name).Inc()
			pause := min(throttled.RetryAfter, maxThrottlePause)
			if pause <= 0 {
				pause = defaultThrottlePause
			}
			// The pause holds back every caller of this provider; the retry below
			// waits for it in the budget queue like everybody else.
			p.budget.pause(pause)
			log.FromContext(ctx).V(2).Info("Cloud API throttled; pausing provider", "provider", p.name, "method", method, "pause", pause)
		case stratus.IsTransient(err):
			backoff = wait.Jitter(p.retryBackoff<<min(attempt, 10), 0.5)
		default:
			p.observeOutcome(err)
			return v, err
		}
		if attempt >= p.maxRetries {
			p.observeOutcome(err)
			return v, err
		}
		last = err
		log.FromContext(ctx).V(4).Info("Retrying cloud call", "provider", p.name, "method", method, "attempt", attempt+1, "error", err.Error())
		if backoff > 0 {
			if werr := sleepCtx(ctx, p.clock, backoff); werr != nil {
				return v, fmt.Errorf("%w (retry abandoned: %w)", err, werr)
			}
		}
	}
}

// callErr is call for methods that return only an error.
func callErr(ctx context.Context, p *Provider, method string, fn func(context.Context) error) error {
	_, err := call(ctx, p, method, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

// sleepCtx waits d on clk, or until ctx ends.
func sleepCtx(ctx context.Context, clk clock.Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// outcome is the metric label of a call's result.
func outcome(err error) string {
	var retry *cloudproviderapi.RetryError
	var throttled *stratus.ThrottledError
	switch {
	case err == nil:
		return OutcomeSuccess
	case errors.As(err, &throttled):
		return OutcomeThrottled
	case errors.As(err, &retry):
		return OutcomeRetryLater
	case errors.Is(err, cloudprovider.InstanceNotFound):
		return OutcomeNotFound
	case errors.Is(err, cloudprovider.NotImplemented):
		return OutcomeNotImplemented
	case errors.Is(err, cloudprovider.ImplementedElsewhere):
		return OutcomeImplementedElsewhere
	case stratus.IsTransient(err):
		return OutcomeTransient
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	default:
		return OutcomeError
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
