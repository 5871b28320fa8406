package bench

import (
	"strings"
	"testing"
	"time"
)

func TestSizesSet(t *testing.T) {
	s := QuickSizes
	for _, kv := range []string{"lbBurstServices=123", "steadyWindow=90s", "memoryNodes=0", "memoryWait=2m"} {
		if err := s.Set(kv); err != nil {
			t.Fatalf("Set(%q): %v", kv, err)
		}
	}
	if s.LBBurstServices != 123 || s.SteadyWindow != 90*time.Second || s.MemoryNodes != 0 || s.MemoryWait != 2*time.Minute {
		t.Errorf("after Set: %+v", s)
	}
	if s.BurstNodes != QuickSizes.BurstNodes {
		t.Errorf("Set changed another size: %+v", s)
	}
	if err := s.Set("ladderRungs=10,20"); err != nil || len(s.LadderRungs) != 2 || s.LadderRungs[1] != 20 {
		t.Errorf("Set(ladderRungs=10,20): %v, rungs %v", err, s.LadderRungs)
	}
	for kv, want := range map[string]string{
		"ladderRungs=20,10": "increasing",
		"ladderRungs=a":     "increasing",
		"lbBurstServices":   "want name=value",
		"nodes=3":           "unknown name",
		"burstNodes=-1":     "not a count",
		"burstNodes=many":   "not a count",
		"steadyWindow=10":   "not a positive duration",
		"steadyWindow=-1m":  "not a positive duration",
		"memoryWait=0s":     "not a positive duration",
	} {
		if err := s.Set(kv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%q) = %v, want an error containing %q", kv, err, want)
		}
	}
}

func TestRatiosSkipRunChecks(t *testing.T) {
	r := ratios(Metrics{"cloudCalls": 10, checkPrefix + "x": 5}, Metrics{"cloudCalls": 5, checkPrefix + "x": 5})
	if r["cloudCalls"] != 2 {
		t.Errorf("cloudCalls ratio %v, want 2", r["cloudCalls"])
	}
	if _, ok := r[checkPrefix+"x"]; ok {
		t.Errorf("a run check has a ratio: %v", r)
	}
}
