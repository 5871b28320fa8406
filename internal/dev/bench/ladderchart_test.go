package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot/plotter"
)

func TestLadderPointsByRung(t *testing.T) {
	m := Metrics{
		"nodes=02000 peakRSSMiB":        120,
		"nodes=01000 peakRSSMiB":        80,
		"nodes=01000 cloudCallsPerHour": 60,
		"nodes=05000 peakRSSMiB":        0,  // no point on a log axis
		"nodes=00000 peakRSSMiB":        60, // the floor: no point either
		"peakRSSMiB":                    1,  // not a rung
	}
	want := plotter.XYs{{X: 1000, Y: 80}, {X: 2000, Y: 120}}
	if diff := cmp.Diff(want, ladderPoints(m, "peakRSSMiB", false)); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
	withZero := plotter.XYs{{X: 1000, Y: 80}, {X: 2000, Y: 120}, {X: 5000, Y: 0}}
	if diff := cmp.Diff(withZero, ladderPoints(m, "peakRSSMiB", true)); diff != "" {
		t.Errorf("points with zeros (-want +got):\n%s", diff)
	}
}

func TestWriteLadderChartDrawsAPNG(t *testing.T) {
	side := func(k float64) Metrics {
		m := Metrics{}
		for _, f := range ladderFigures {
			m["nodes=01000 "+f.metric] = 10 * k
			m["nodes=02000 "+f.metric] = 20 * k
		}
		return m
	}
	r := &Report{Scenarios: []Result{{Name: "scale-ladder", Upstream: side(3), Stratus: side(1)}}}
	// A settled cluster's API requests: none for either manager at any rung.
	for _, m := range []Metrics{r.Scenarios[0].Upstream, r.Scenarios[0].Stratus} {
		m["nodes=01000 kubeAPIRequestsPerHour"], m["nodes=02000 kubeAPIRequestsPerHour"] = 0, 0
	}
	path := filepath.Join(t.TempDir(), "ladder.png")
	if err := r.WriteLadderChart(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG", path)
	}
	if err := (&Report{Scenarios: []Result{{Name: "memory"}}}).WriteLadderChart(path); err == nil {
		t.Error("a report without the scale ladder drew a ladder chart")
	}
}
