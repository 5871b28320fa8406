package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// Error is an error answer of the API.
type Error struct {
	// Operation is the method and path, e.g. "GET /v1/instances/i-1".
	Operation string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code and Message come from the error body (api.Code* constants).
	Code    string
	Message string
	// RetryAfter is the server's Retry-After for a 429, else 0.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := fmt.Sprintf("minicloud %s: %d %s: %s", e.Operation, e.StatusCode, e.Code, e.Message)
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

func newError(op string, resp *http.Response, body []byte) *Error {
	e := &Error{Operation: op, StatusCode: resp.StatusCode}
	var eb api.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	} else {
		e.Code, e.Message = http.StatusText(resp.StatusCode), string(body)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		e.RetryAfter = time.Second
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	return e
}

func hasStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == status
}

// IsNotFound reports whether err says the resource (or endpoint) does not exist.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err says a name, destination or idempotency
// key is already in use.
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsInvalid reports whether err says the request was malformed.
func IsInvalid(err error) bool { return hasStatus(err, http.StatusBadRequest) }

// IsUnauthorized reports whether err says the token was missing or wrong.
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsThrottled reports whether err is a 429; RetryAfter says how long to wait.
func IsThrottled(err error) bool { return hasStatus(err, http.StatusTooManyRequests) }

// IsServerError reports whether err is a 5xx answer (an injected fault or
// a server failure): the same call may succeed later.
func IsServerError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode >= 500
}

// IsRetryable reports whether the same call may succeed later: throttled,
// a server error, or no answer at all (connection refused, timeout).
// Invalid, unauthorized, not-found and conflict answers are final.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// RetryAfter returns how long the server asked to wait before retrying, and
// whether err is a throttling error at all.
func RetryAfter(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) && e.StatusCode == http.StatusTooManyRequests {
		return e.RetryAfter, true
	}
	return 0, false
}
