package statemetrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestCollect(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	for _, tc := range []struct {
		name    string
		entries []Entry
		err     error
		want    string
	}{
		{
			name: "counts by provider and state, the oldest of each, none without a time",
			entries: []Entry{
				{Provider: "a", State: "provisioning", Since: now.Add(-90 * time.Second)},
				{Provider: "a", State: "provisioning", Since: now.Add(-10 * time.Second)},
				{Provider: "a", State: "ready"},
				{Provider: "b", State: "provisioning", Since: now.Add(-5 * time.Second)},
			},
			want: `
# HELP test_objects objects
# TYPE test_objects gauge
test_objects{provider="a",state="provisioning"} 2
test_objects{provider="a",state="ready"} 1
test_objects{provider="b",state="provisioning"} 1
# HELP test_objects_oldest_seconds oldest
# TYPE test_objects_oldest_seconds gauge
test_objects_oldest_seconds{provider="a",state="provisioning"} 90
test_objects_oldest_seconds{provider="b",state="provisioning"} 5
`,
		},
		{name: "nothing", want: ""},
		{name: "a failed read yields no samples", entries: []Entry{{Provider: "a", State: "ready"}}, err: errors.New("cache not synced"), want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New("test_objects", "objects", "oldest")
			c.Track(func(context.Context) ([]Entry, error) { return tc.entries, tc.err }, clk)
			if err := testutil.CollectAndCompare(c, strings.NewReader(tc.want)); err != nil {
				t.Error(err)
			}
		})
	}
}

// An untracked collector (no controller started: a standby) reports nothing.
func TestUntracked(t *testing.T) {
	if n := testutil.CollectAndCount(New("test_objects", "objects", "oldest")); n != 0 {
		t.Errorf("%d samples before Track, want 0", n)
	}
}
