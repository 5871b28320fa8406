package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// A client limited to the server's rate gets no 429s where an unlimited one
// does.
func TestWithRateLimitAvoidsThrottling(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{RateLimit: 40, Burst: 10, ExtraTokens: []string{"limited"}})
	ctx := context.Background()

	throttled := 0
	for range 30 {
		if _, err := mc.Client.ListInstances(ctx, client.ListOptions{}); client.IsThrottled(err) {
			throttled++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if throttled == 0 {
		t.Fatal("30 back-to-back requests over a 40/s limit with burst 10 were never throttled; the test proves nothing")
	}

	limited, err := client.New(mc.URL, "limited", client.WithRateLimit(40, 5))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := limited.ListInstances(ctx, client.ListOptions{}); err != nil {
			t.Fatalf("request %d of a rate-limited client: %v", i, err)
		}
	}
	st, err := limited.TokenStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Throttled != 0 || st.Requests["GET /v1/instances"] != 30 {
		t.Errorf("rate-limited client's stats: %d requests, %d throttled; want 30 and 0", st.Requests["GET /v1/instances"], st.Throttled)
	}

	// A request that cannot get its turn before its context ends fails
	// without being sent.
	slow, err := client.New(mc.URL, "limited", client.WithRateLimit(0.001, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slow.ListInstances(ctx, client.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := slow.ListInstances(cctx, client.ListOptions{}); err == nil || !strings.Contains(err.Error(), "client-side rate limit") {
		t.Errorf("request over a client-side limit with a done context: %v, want an error naming the limit", err)
	}
}
