package bench

import (
	"math"
	"testing"
)

func TestQuantileSince(t *testing.T) {
	before := histogram{bounds: []float64{0.1, 1, math.Inf(1)}, counts: []float64{10, 10, 10}}
	// Since before: 90 observations at most 0.1 s, 9 more at most 1 s, 1 above.
	now := histogram{bounds: []float64{0.1, 1, math.Inf(1)}, counts: []float64{100, 109, 110}}
	for _, tc := range []struct {
		q, want float64
	}{{0.5, 0.1}, {0.9, 0.1}, {0.95, 1}, {0.99, 1}, {1, math.Inf(1)}} {
		if got := now.quantileSince(before, tc.q); got != tc.want {
			t.Errorf("q%v = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := now.quantileSince(now, 0.99); got != 0 {
		t.Errorf("no observations since: %v, want 0", got)
	}
}
