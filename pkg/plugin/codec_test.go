package plugin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// Every kind of provider error keeps its meaning and message through the
// gRPC status of a reply.
func TestErrorsCrossTheWire(t *testing.T) {
	c := &Client{addr: "unix:///test"}
	for _, tc := range []struct {
		name  string
		err   error
		check func(error) bool
	}{
		{"plain", errors.New("quota exceeded for project p"), func(e error) bool {
			return !stratus.IsTransient(e) && !errors.Is(e, cloudprovider.InstanceNotFound) && !errors.Is(e, ErrProtocol)
		}},
		{"instance not found", fmt.Errorf("instance i-1: %w", cloudprovider.InstanceNotFound), func(e error) bool {
			return errors.Is(e, cloudprovider.InstanceNotFound)
		}},
		// k8s.io/cloud-provider compares the bare sentinels with ==.
		{"bare instance not found", cloudprovider.InstanceNotFound, func(e error) bool {
			return e == cloudprovider.InstanceNotFound
		}},
		{"bare not implemented", cloudprovider.NotImplemented, func(e error) bool {
			return e == cloudprovider.NotImplemented
		}},
		{"not implemented", fmt.Errorf("zones: %w", cloudprovider.NotImplemented), func(e error) bool {
			return errors.Is(e, cloudprovider.NotImplemented)
		}},
		{"implemented elsewhere", cloudprovider.ImplementedElsewhere, func(e error) bool {
			return e == cloudprovider.ImplementedElsewhere
		}},
		{"retry", cloudproviderapi.NewRetryError("load balancer lb-1 is provisioning", 7*time.Second), func(e error) bool {
			var r *cloudproviderapi.RetryError
			return errors.As(e, &r) && r.RetryAfter() == 7*time.Second
		}},
		{"throttled", fmt.Errorf("list instances: %w", stratus.Throttled(3*time.Second, errors.New("HTTP 429"))), func(e error) bool {
			var th *stratus.ThrottledError
			return errors.As(e, &th) && th.RetryAfter == 3*time.Second
		}},
		{"throttled without retry-after", stratus.Throttled(0, nil), func(e error) bool {
			var th *stratus.ThrottledError
			return errors.As(e, &th) && th.RetryAfter == 0
		}},
		{"transient", stratus.Transient(errors.New("HTTP 503")), stratus.IsTransient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.mapErr(context.Background(), "Method", toStatus(tc.err))
			if got.Error() != tc.err.Error() {
				t.Errorf("message %q, want %q", got.Error(), tc.err.Error())
			}
			if !tc.check(got) {
				t.Errorf("%#v lost the meaning of %v", got, tc.err)
			}
		})
	}
}
