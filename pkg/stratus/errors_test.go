package stratus_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

func TestErrors(t *testing.T) {
	cause := errors.New("HTTP 429")
	for _, tc := range []struct {
		name          string
		err           error
		wantMsg       string
		wantThrottled time.Duration // -1: not throttled
		wantTransient bool
	}{
		{"throttled with delay", stratus.Throttled(3*time.Second, cause),
			"HTTP 429", 3 * time.Second, false},
		{"throttled without a cause", stratus.Throttled(3*time.Second, nil),
			"throttled by the cloud API, retry after 3s", 3 * time.Second, false},
		{"throttled, wrapped", fmt.Errorf("list instances: %w", stratus.Throttled(0, nil)),
			"list instances: throttled by the cloud API", 0, false},
		{"transient", stratus.Transient(cause), "HTTP 429", -1, true},
		{"transient, wrapped", fmt.Errorf("get: %w", stratus.Transient(cause)), "get: HTTP 429", -1, true},
		{"plain", cause, "HTTP 429", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err.Error() != tc.wantMsg {
				t.Errorf("Error() = %q, want %q", tc.err.Error(), tc.wantMsg)
			}
			var th *stratus.ThrottledError
			switch isThrottled := errors.As(tc.err, &th); {
			case tc.wantThrottled < 0 && isThrottled:
				t.Error("unexpectedly a ThrottledError")
			case tc.wantThrottled >= 0 && !isThrottled:
				t.Error("not a ThrottledError")
			case isThrottled && th.RetryAfter != tc.wantThrottled:
				t.Errorf("RetryAfter = %v, want %v", th.RetryAfter, tc.wantThrottled)
			}
			if got := stratus.IsTransient(tc.err); got != tc.wantTransient {
				t.Errorf("IsTransient = %v, want %v", got, tc.wantTransient)
			}
		})
	}
	if stratus.Transient(nil) != nil {
		t.Error("Transient(nil) != nil")
	}
	if !errors.Is(stratus.Throttled(time.Second, cause), cause) || !errors.Is(stratus.Transient(cause), cause) {
		t.Error("the cause is not reachable with errors.Is")
	}
}
