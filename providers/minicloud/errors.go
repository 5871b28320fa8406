package minicloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// classify wraps an error of the minicloud client so that stratus's cloud
// layer can act on it: 429 becomes a stratus.ThrottledError carrying the
// server's Retry-After, 5xx and failed connections a stratus.TransientError.
// what says what the provider alone knows about the call (the step, the
// object looked for), or is empty: the client's error already names the
// request and its status, and the cloud layer or the manager names the
// Kubernetes object. Callers handle 404 themselves, before classify,
// because its meaning depends on the method.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && ce.StatusCode == http.StatusTooManyRequests:
		err = stratus.Throttled(ce.RetryAfter, err)
	case errors.As(err, &ce) && ce.StatusCode >= 500:
		err = stratus.Transient(err)
	case ce == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		// No answer at all (connection refused or reset): the next try may work.
		err = stratus.Transient(err)
	}
	if what == "" {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}
