package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// isNotFound reports whether err is the API's 404.
func isNotFound(err error) bool { return gophercloud.ResponseCodeIs(err, http.StatusNotFound) }

// classify wraps err with what failed and marks it for stratus's cloud
// layer: 429 becomes stratus.Throttled with the server's Retry-After, 5xx and
// failures to get an answer at all (refused or reset connections,
// timeouts) stratus.Transient. Other answers (400, 403, a refused
// authentication) are returned as they are: repeating the call will not
// help. Callers handle 404 themselves, before classify, because its
// meaning depends on the call.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, mark(err))
}

// mark marks err as classify describes. A token that expired and could
// not be renewed is marked by the renewal's failure: Keystone down (5xx,
// no answer) is transient, credentials it refuses are not.
func mark(err error) error {
	var (
		ue gophercloud.ErrUnexpectedResponseCode
		ur *gophercloud.ErrUnableToReauthenticate
	)
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &ur) && ur.ErrReauth != nil:
		var te *stratus.ThrottledError
		switch m := mark(ur.ErrReauth); {
		case errors.As(m, &te):
			return stratus.Throttled(te.RetryAfter, err)
		case stratus.IsTransient(m):
			return stratus.Transient(err)
		}
		return err
	case errors.As(err, &ue) && ue.Actual == http.StatusTooManyRequests:
		return stratus.Throttled(retryAfter(ue.ResponseHeader), err)
	case errors.As(err, &ue) && ue.Actual >= 500:
		return stratus.Transient(err)
	case errors.As(err, &ue), isConfigError(err):
		return err
	}
	// No HTTP answer: the next try may reach the cloud.
	return stratus.Transient(err)
}

// isConfigError reports gophercloud errors that say the configuration or
// the catalog is wrong, which retrying does not fix.
func isConfigError(err error) bool {
	var (
		sn gophercloud.ErrServiceNotFound
		en gophercloud.ErrEndpointNotFound
	)
	return errors.As(err, &sn) || errors.As(err, &en)
}

// retryAfter reads Retry-After in seconds or as an HTTP date; 0 when absent.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t))
	}
	return 0
}
