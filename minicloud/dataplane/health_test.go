package dataplane

import (
	"errors"
	"testing"
)

func TestCheckerThresholds(t *testing.T) {
	fail := errors.New("refused")
	opts := Options{UnhealthyThreshold: 2, HealthyThreshold: 3}
	for _, tc := range []struct {
		name    string
		results []error
		want    string
	}{
		{"no probe yet", nil, "unknown"},
		{"first success decides", []error{nil}, "healthy"},
		{"first failure decides", []error{fail}, "unhealthy"},
		{"one failure is not enough", []error{nil, fail}, "healthy"},
		{"two failures flip", []error{nil, fail, fail}, "unhealthy"},
		{"a success resets the streak", []error{nil, fail, nil, fail}, "healthy"},
		{"recovery needs three", []error{fail, nil, nil}, "unhealthy"},
		{"recovered", []error{fail, nil, nil, nil}, "healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &checker{state: Health{State: "unknown"}}
			for _, r := range tc.results {
				c.record(r, opts)
			}
			if got := c.current(); got.State != tc.want {
				t.Fatalf("state %+v, want %s", got, tc.want)
			}
		})
	}
}
