package minicloud_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// waitLB polls the load balancer until cond holds (10s at most).
func waitLB(t *testing.T, c *client.Client, id string, cond func(*api.LoadBalancer) bool) *api.LoadBalancer {
	t.Helper()
	var last *api.LoadBalancer
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		lb, err := c.GetLoadBalancer(ctx, id)
		if err != nil {
			return false, err
		}
		last = lb
		return cond(lb), nil
	})
	if err != nil {
		t.Fatalf("load balancer %s: condition not met: %v; last seen %+v", id, err, last)
	}
	return last
}

func ioReadFull(r io.Reader, buf []byte) (int, error) { return io.ReadFull(r, buf) }
