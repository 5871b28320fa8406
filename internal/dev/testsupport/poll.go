package testsupport

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The first check comes at once and the next ones back off from a
// millisecond to maxInterval: a condition that holds soon is seen soon,
// and a slow one does not load the apiserver or the cloud.
const maxInterval = 100 * time.Millisecond

// Eventually checks cond until it returns true, and fails the test,
// naming what it waited for, when timeout passes first or when cond
// returns an error (an error ends the wait: return false, nil to keep
// waiting). cond's context ends at the timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// EventuallyState is Eventually for a condition that says what it saw
// each time it does not hold; the failure carries the last of those.
func EventuallyState(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := poll(timeout, func(ctx context.Context) (bool, error) {
		var ok bool
		ok, last = cond(ctx)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

// Consistently checks cond for the whole of d and fails the test as soon
// as it does not hold, with what cond says it saw: the check that
// something does not happen.
func Consistently(t testing.TB, d time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var seen string
	err := poll(d, func(ctx context.Context) (bool, error) {
		ok, state := cond(ctx)
		if !ok {
			seen = state
			return false, errViolated
		}
		return false, nil
	})
	if errors.Is(err, errViolated) {
		t.Fatalf("%s: violated: %s", what, seen)
	}
}

var errViolated = errors.New("violated")

// poll runs cond until it returns true or an error, or timeout passes.
func poll(timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	// Not the test's context: helpers also wait in t.Cleanup, after it ends.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	interval := time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		timer.Reset(interval)
		select {
		case <-ctx.Done():
			return errors.New("not within " + timeout.String())
		case <-timer.C:
		}
		interval = min(2*interval, maxInterval)
	}
}
