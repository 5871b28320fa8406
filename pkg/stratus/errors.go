package stratus

import (
	"errors"
	"fmt"
	"time"
)

// ThrottledError reports that the cloud API refused a call because this client
// exceeded its rate limit (HTTP 429 with Retry-After, or the cloud's equivalent).
//
// Return it (possibly wrapped; stratus finds it with errors.As on *ThrottledError)
// so that stratus's cloud layer pauses every call to the provider for RetryAfter
// and then retries, instead of hammering the API or failing the caller. It is
// different from k8s.io/cloud-provider/api.RetryError, which EnsureLoadBalancer
// returns while a load balancer is still provisioning: that one reaches the service
// controller unchanged and re-queues the Service.
type ThrottledError struct {
	// RetryAfter is how long the cloud asked to wait. Zero means "not said": the
	// layer then waits a short default.
	RetryAfter time.Duration
	// Err is the underlying error (e.g. the HTTP response as an error). May be nil.
	Err error
}

// Error is the underlying error's message when there is one: it is the cloud's
// answer, which already says that it throttled (as TransientError adds nothing
// to the error it marks). Without one it describes the throttling.
func (e *ThrottledError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	msg := "throttled by the cloud API"
	if e.RetryAfter > 0 {
		msg = fmt.Sprintf("%s, retry after %s", msg, e.RetryAfter)
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *ThrottledError) Unwrap() error { return e.Err }

// Throttled returns a *ThrottledError asking to retry after d.
func Throttled(d time.Duration, err error) error {
	return &ThrottledError{RetryAfter: d, Err: err}
}

// TransientError marks an error as retryable: the same call may succeed when
// repeated shortly (a 5xx response, a reset connection, a timeout). The cloud layer
// retries such calls with jittered exponential backoff, within the caller's
// deadline. Errors that are not marked are returned to the caller at once.
type TransientError struct {
	// Err is the underlying error.
	Err error
}

// Error returns the underlying error's message.
func (e *TransientError) Error() string {
	if e.Err == nil {
		return "transient cloud error"
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *TransientError) Unwrap() error { return e.Err }

// Transient marks err as retryable. It returns nil for a nil err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err}
}

// IsTransient reports whether err, or an error it wraps, is a *TransientError.
func IsTransient(err error) bool {
	var t *TransientError
	return errors.As(err, &t)
}
